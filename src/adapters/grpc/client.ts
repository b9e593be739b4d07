/**
 * The CSI client kubelet's csi plugin holds for each registered driver, over gRPC on the
 * driver's unix socket: the engine's {@link CsiNodeClient} port, plus the Identity and
 * Controller RPCs that tests and the CLI use.
 *
 * - One channel per client (all three services share it), plaintext, created lazily by grpc-js
 *   on the first call. Calls do not wait for the socket to appear: with no server a call fails
 *   at once with UNAVAILABLE (kubelet retries later, as it does for any uncertain error).
 * - Every call goes to whatever serves the socket path now, as kubelet's, which dials the path
 *   for each call: before a call the socket file is checked (an asynchronous stat, shared by the
 *   calls that start meanwhile, so a thousand at once cost two), and when it is no longer the
 *   file the channel was opened for (a driver restarted, or a new one removed the old socket and
 *   bound the path) the channel is replaced. Calls in flight on the old channel go on to their
 *   end there (the old driver answers them, or they fail UNAVAILABLE when it dies); no call waits
 *   for grpc-js' reconnect backoff to reach the new driver.
 * - Every call carries a deadline: by default 2 minutes, kubelet's csiTimeout. A call that runs
 *   past it fails with DEADLINE_EXCEEDED, which {@link isFinalCsiError} treats as uncertain.
 * - Every failure is a {@link CsiCallError}: the gRPC status code and details of a call that
 *   reached the transport; `code` undefined for one that was refused locally (a request that
 *   cannot be encoded, a closed client).
 * - Answers are bounded before they are decoded: at most {@link MAX_CSI_MESSAGE_BYTES} (4 MiB,
 *   grpc-go's and so kubelet's default receive limit; grpc-js refuses a longer message from its
 *   5-byte length prefix, and stops inflating a compressed one there), and at most
 *   {@link MAX_NODE_ANSWER_BYTES} for the Node calls the volume manager makes, whose answers are a
 *   few bytes (a 4 MiB NodeGetCapabilities answer of a million empty entries decodes into some
 *   200 MB of objects). An answer the client refuses — too long, not a protobuf message of the
 *   method's response type, ended without a gRPC status, NodeGetInfo without node_id — fails
 *   with an error naming the driver, its socket and the method: RESOURCE_EXHAUSTED for a size
 *   (uncertain, as grpc-go's), INTERNAL for the rest (final, as grpc-go's unmarshal error).
 */
import { stat } from 'node:fs/promises';

import * as grpc from '@grpc/grpc-js';

import {
  CsiCallError,
  GrpcStatus,
  type CsiDriverRegistry,
  type CsiNodeClient,
  type CsiRpcMethod,
  type NodeCapability,
  type NodePublishVolumeRequest,
  type NodeStageVolumeRequest,
  type NodeUnpublishVolumeRequest,
  type NodeUnstageVolumeRequest,
  type VolumeCapability,
} from '../../ports/csi.js';
import {
  nodeCapabilitiesFromWire,
  toWireNodePublishRequest,
  toWireNodeStageRequest,
  toWireNodeUnpublishRequest,
  toWireNodeUnstageRequest,
  toWireVolumeCapability,
  wireBool,
  wireMap,
  wireString,
} from './convert.js';
import { FreshSharedCall } from '../../ports/concurrency.js';
import { errorCode } from '../../ports/fs.js';
import { normalizeEndpoint, unixSocketPath } from './endpoint.js';
import { csiServices, type UnaryMethod } from './loader.js';
import type * as wire from './messages.js';
import type { ControllerRpcs, IdentityRpcs, MessageInit, NodeRpcs } from './messages.js';

/** kubelet's csiTimeout. */
export const DEFAULT_CSI_TIMEOUT_MS = 2 * 60 * 1000;

/** The longest answer the client reads (grpc.max_receive_message_length): grpc-go's default, 4 MiB. */
export const MAX_CSI_MESSAGE_BYTES = 4 * 1024 * 1024;

/**
 * The longest answer to the Node calls the volume manager makes (NodeGetCapabilities, the
 * stage and publish calls, NodeGetInfo): their answers are empty or a few entries, and the CSI
 * spec asks for at most 4 KiB in a map; refused before it is decoded.
 */
export const MAX_NODE_ANSWER_BYTES = 64 * 1024;

const SMALL_ANSWERS: ReadonlySet<CsiRpcMethod> = new Set<CsiRpcMethod>([
  'NodeGetCapabilities',
  'NodeStageVolume',
  'NodeUnstageVolume',
  'NodePublishVolume',
  'NodeUnpublishVolume',
  'NodeGetInfo',
]);

/** grpc-js' own refusals of what a server sent (1.14: stream-decoder, compression-filter, call-stream). */
const REFUSED_BY_GRPC_JS: readonly { readonly code: number; readonly details: RegExp }[] = [
  { code: GrpcStatus.RESOURCE_EXHAUSTED, details: /^Received message (larger than max|that decompresses to a size larger than)/ },
  { code: GrpcStatus.INTERNAL, details: /^Failed to decompress|Call ended without gRPC status/ },
];

/**
 * The longest the check of the socket file before a call may take (a hung file system): past it,
 * the call goes on over the channel the client has.
 */
export const SOCKET_CHECK_TIMEOUT_MS = 1_000;

/** A channel and the socket file it was opened for (undefined until the first check). */
interface Channel {
  readonly client: grpc.Client;
  socket: string | undefined;
}

/**
 * What tells one socket file from the next bound on the same path: device, inode and change time
 * (a new bind makes a new file; an inode number may be reused, its change time then differs);
 * 'missing' when there is no file; undefined when it cannot be told (not in time, or an error).
 */
async function socketFileIdentity(socketPath: string): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), SOCKET_CHECK_TIMEOUT_MS);
  });
  const read = stat(socketPath, { bigint: true }).then(
    (s) => `${s.dev}:${s.ino}:${s.ctimeNs}`,
    (err: unknown) => (errorCode(err) === 'ENOENT' ? 'missing' : undefined),
  );
  try {
    return await Promise.race([read, late]);
  } finally {
    clearTimeout(timer);
  }
}

export interface GrpcCsiClientOptions {
  /** Deadline of each Node call, in ms. Default {@link DEFAULT_CSI_TIMEOUT_MS}. */
  readonly timeoutMs?: number;
  /** Deadline of each Identity call. Default: timeoutMs. */
  readonly identityTimeoutMs?: number;
  /** Deadline of each Controller call. Default: timeoutMs. */
  readonly controllerTimeoutMs?: number;
  /** Extra grpc-js channel options (e.g. reconnect backoff); the receive limit stays {@link MAX_CSI_MESSAGE_BYTES}. */
  readonly channelOptions?: grpc.ChannelOptions;
  /** The driver's name, for errors about its answers (the registry gives it). */
  readonly driverName?: string;
}

export interface CsiIdentityClient {
  getPluginInfo(): Promise<wire.GetPluginInfoResponse>;
  getPluginCapabilities(): Promise<wire.GetPluginCapabilitiesResponse>;
  /** The raw answer; see {@link probeReady}. */
  probe(): Promise<wire.ProbeResponse>;
}

export interface CreateVolumeParams {
  readonly name: string;
  readonly volumeCapabilities: readonly VolumeCapability[];
  readonly capacityRange?: MessageInit<wire.CapacityRange>;
  readonly parameters?: wire.WireStringMap;
  readonly secrets?: wire.WireStringMap;
  readonly volumeContentSource?: MessageInit<wire.VolumeContentSource>;
  readonly accessibilityRequirements?: MessageInit<wire.TopologyRequirement>;
}

export interface DeleteVolumeParams {
  readonly volumeId: string;
  readonly secrets?: wire.WireStringMap;
}

export interface ControllerPublishVolumeParams {
  readonly volumeId: string;
  readonly nodeId: string;
  readonly volumeCapability: VolumeCapability;
  readonly readonly: boolean;
  readonly secrets?: wire.WireStringMap;
  readonly volumeContext?: wire.WireStringMap;
}

export interface ControllerUnpublishVolumeParams {
  readonly volumeId: string;
  /** '' (the default): unpublish from every node. */
  readonly nodeId?: string;
  readonly secrets?: wire.WireStringMap;
}

export interface CsiControllerClient {
  createVolume(params: CreateVolumeParams): Promise<wire.CreateVolumeResponse>;
  deleteVolume(params: DeleteVolumeParams): Promise<void>;
  controllerPublishVolume(params: ControllerPublishVolumeParams): Promise<wire.ControllerPublishVolumeResponse>;
  controllerUnpublishVolume(params: ControllerUnpublishVolumeParams): Promise<void>;
  /** The RPC capabilities the controller reported (types this proto does not know are dropped). */
  controllerGetCapabilities(): Promise<readonly wire.ControllerCapabilityName[]>;
}

/** Probe's answer as the spec reads it: an unset `ready` means ready. */
export function probeReady(res: wire.ProbeResponse): boolean {
  return res.ready?.value ?? true;
}

interface ServiceErrorLike {
  readonly code: number;
  readonly details: string;
}

function isServiceError(err: unknown): err is ServiceErrorLike {
  return (
    typeof err === 'object' &&
    err !== null &&
    typeof (err as { code?: unknown }).code === 'number' &&
    typeof (err as { details?: unknown }).details === 'string'
  );
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function checkTimeout(name: string, ms: number): number {
  if (!Number.isFinite(ms) || ms <= 0) throw new RangeError(`${name} must be a positive number of milliseconds, got ${ms}`);
  return ms;
}

const CONTROLLER_CAPABILITIES: ReadonlySet<string> = new Set<wire.ControllerCapabilityName>([
  'UNKNOWN',
  'CREATE_DELETE_VOLUME',
  'PUBLISH_UNPUBLISH_VOLUME',
  'LIST_VOLUMES',
  'GET_CAPACITY',
  'CREATE_DELETE_SNAPSHOT',
  'LIST_SNAPSHOTS',
  'CLONE_VOLUME',
  'PUBLISH_READONLY',
  'EXPAND_VOLUME',
  'LIST_VOLUMES_PUBLISHED_NODES',
  'VOLUME_CONDITION',
  'GET_VOLUME',
  'SINGLE_NODE_MULTI_WRITER',
]);

function isControllerCapability(v: unknown): v is wire.ControllerCapabilityName {
  return typeof v === 'string' && CONTROLLER_CAPABILITIES.has(v);
}

export class GrpcCsiClient implements CsiNodeClient {
  /** unix:///abs/path.sock, normalized. */
  readonly endpoint: string;
  readonly identity: CsiIdentityClient;
  readonly controller: CsiControllerClient;
  readonly #socketPath: string;
  /** "CSI driver "name" at unix:///…" */
  readonly #driver: string;
  readonly #channelOptions: grpc.ChannelOptions;
  #channel: Channel;
  /** The socket file checks, shared by concurrent calls (each answered by a stat started after it asked). */
  readonly #socketCheck: FreshSharedCall<string | undefined>;
  /** Channels opened because the socket file changed. */
  #reconnects = 0;
  readonly #nodeTimeoutMs: number;
  readonly #identityTimeoutMs: number;
  readonly #controllerTimeoutMs: number;
  #closed = false;
  /** NodeGetCapabilities calls, shared by concurrent callers (each answered by a call sent after it asked). */
  readonly #capabilitiesCalls = new FreshSharedCall(() =>
    this.#unary('NodeGetCapabilities', csiServices().node.methods.NodeGetCapabilities, {}, this.#nodeTimeoutMs).then((res) =>
      Object.freeze(nodeCapabilitiesFromWire(res)),
    ),
  );

  /** Throws {@link InvalidCsiEndpointError} unless `endpoint` is unix:///absolute/path. */
  constructor(endpoint: string, options: GrpcCsiClientOptions = {}) {
    this.#socketPath = unixSocketPath(endpoint);
    this.endpoint = normalizeEndpoint(endpoint);
    this.#nodeTimeoutMs = checkTimeout('timeoutMs', options.timeoutMs ?? DEFAULT_CSI_TIMEOUT_MS);
    this.#identityTimeoutMs = checkTimeout('identityTimeoutMs', options.identityTimeoutMs ?? this.#nodeTimeoutMs);
    this.#controllerTimeoutMs = checkTimeout('controllerTimeoutMs', options.controllerTimeoutMs ?? this.#nodeTimeoutMs);
    this.#driver = `CSI driver ${options.driverName === undefined ? '' : `${JSON.stringify(options.driverName)} `}at ${this.endpoint}`;
    this.#channelOptions = { ...options.channelOptions, 'grpc.max_receive_message_length': MAX_CSI_MESSAGE_BYTES };
    this.#channel = this.#openChannel(undefined);
    const socketPath = this.#socketPath;
    this.#socketCheck = new FreshSharedCall(() => socketFileIdentity(socketPath));

    const { identity, controller } = csiServices();
    const idT = this.#identityTimeoutMs;
    const ctlT = this.#controllerTimeoutMs;
    this.identity = {
      getPluginInfo: () => this.#unary('GetPluginInfo', identity.methods.GetPluginInfo, {}, idT),
      getPluginCapabilities: () => this.#unary('GetPluginCapabilities', identity.methods.GetPluginCapabilities, {}, idT),
      probe: () => this.#unary('Probe', identity.methods.Probe, {}, idT),
    };
    const m = controller.methods;
    this.controller = {
      createVolume: (p) =>
        this.#unary(
          'CreateVolume',
          m.CreateVolume,
          () => ({
            name: wireString(p.name),
            volumeCapabilities: p.volumeCapabilities.map(toWireVolumeCapability),
            capacityRange: p.capacityRange ?? null,
            parameters: wireMap(p.parameters),
            secrets: wireMap(p.secrets),
            volumeContentSource: p.volumeContentSource ?? null,
            accessibilityRequirements: p.accessibilityRequirements ?? null,
          }),
          ctlT,
        ),
      deleteVolume: async (p) => {
        await this.#unary('DeleteVolume', m.DeleteVolume, { volumeId: wireString(p.volumeId), secrets: wireMap(p.secrets) }, ctlT);
      },
      controllerPublishVolume: (p) =>
        this.#unary(
          'ControllerPublishVolume',
          m.ControllerPublishVolume,
          () => ({
            volumeId: wireString(p.volumeId),
            nodeId: wireString(p.nodeId),
            volumeCapability: toWireVolumeCapability(p.volumeCapability),
            readonly: wireBool(p.readonly),
            secrets: wireMap(p.secrets),
            volumeContext: wireMap(p.volumeContext),
          }),
          ctlT,
        ),
      controllerUnpublishVolume: async (p) => {
        await this.#unary(
          'ControllerUnpublishVolume',
          m.ControllerUnpublishVolume,
          { volumeId: wireString(p.volumeId), nodeId: wireString(p.nodeId ?? ''), secrets: wireMap(p.secrets) },
          ctlT,
        );
      },
      controllerGetCapabilities: async () => {
        const res = await this.#unary('ControllerGetCapabilities', m.ControllerGetCapabilities, {}, ctlT);
        const out: wire.ControllerCapabilityName[] = [];
        for (const cap of res.capabilities) {
          const t = cap.rpc?.type;
          if (isControllerCapability(t) && !out.includes(t)) out.push(t);
        }
        return out;
      },
    };
  }

  // ---------------------------------------------------------------- CsiNodeClient

  /**
   * NodeGetCapabilities. kubelet asks before every stage and publish (up to three times per
   * operation); at a thousand volumes at once that was a third of the agent's gRPC work and of the
   * driver's calls. Concurrent callers share calls the way the mount table reads are shared: while
   * one call is in flight, every new caller waits for the single call that starts when it settles,
   * so each answer still comes from a call sent after the question was asked (as kubelet's own
   * call would), an error reaches every caller that shared it, and nothing is kept afterwards.
   */
  nodeGetCapabilities(): Promise<readonly NodeCapability[]> {
    return this.#capabilitiesCalls.call();
  }

  async nodeStageVolume(req: NodeStageVolumeRequest): Promise<void> {
    await this.#unary('NodeStageVolume', csiServices().node.methods.NodeStageVolume, () => toWireNodeStageRequest(req), this.#nodeTimeoutMs);
  }

  async nodeUnstageVolume(req: NodeUnstageVolumeRequest): Promise<void> {
    await this.#unary('NodeUnstageVolume', csiServices().node.methods.NodeUnstageVolume, toWireNodeUnstageRequest(req), this.#nodeTimeoutMs);
  }

  async nodePublishVolume(req: NodePublishVolumeRequest): Promise<void> {
    await this.#unary('NodePublishVolume', csiServices().node.methods.NodePublishVolume, () => toWireNodePublishRequest(req), this.#nodeTimeoutMs);
  }

  async nodeUnpublishVolume(req: NodeUnpublishVolumeRequest): Promise<void> {
    await this.#unary('NodeUnpublishVolume', csiServices().node.methods.NodeUnpublishVolume, toWireNodeUnpublishRequest(req), this.#nodeTimeoutMs);
  }

  // ---------------------------------------------------------------- more of the Node service

  /** NodeGetInfo; an answer without node_id (which the spec requires) is refused. */
  async nodeGetInfo(): Promise<wire.NodeGetInfoResponse> {
    const res = await this.#unary('NodeGetInfo', csiServices().node.methods.NodeGetInfo, {}, this.#nodeTimeoutMs);
    if (res.nodeId === '') throw this.#invalidAnswer('NodeGetInfo', GrpcStatus.INTERNAL, 'node_id is empty (the CSI spec requires it)');
    return res;
  }

  // ---------------------------------------------------------------- any RPC, as built by the caller

  /**
   * Any Identity RPC with the request exactly as given (fields left out are sent as the proto's
   * defaults): for conformance tests, which must send what a well-behaved CO would not.
   */
  identityCall<M extends keyof IdentityRpcs & CsiRpcMethod>(method: M, request: MessageInit<IdentityRpcs[M][0]>): Promise<IdentityRpcs[M][1]> {
    // UnaryMethods<IdentityRpcs> maps each M to exactly this; TypeScript cannot see it through the generic index.
    const def = csiServices().identity.methods[method] as unknown as UnaryMethod<IdentityRpcs[M][0], IdentityRpcs[M][1]>;
    return this.#unary(method, def, request, this.#identityTimeoutMs);
  }

  /** Any Controller RPC with the request exactly as given. */
  controllerCall<M extends keyof ControllerRpcs & CsiRpcMethod>(method: M, request: MessageInit<ControllerRpcs[M][0]>): Promise<ControllerRpcs[M][1]> {
    // UnaryMethods<ControllerRpcs> maps each M to exactly this; TypeScript cannot see it through the generic index.
    const def = csiServices().controller.methods[method] as unknown as UnaryMethod<ControllerRpcs[M][0], ControllerRpcs[M][1]>;
    return this.#unary(method, def, request, this.#controllerTimeoutMs);
  }

  /** Any Node RPC with the request exactly as given. */
  nodeCall<M extends keyof NodeRpcs & CsiRpcMethod>(method: M, request: MessageInit<NodeRpcs[M][0]>): Promise<NodeRpcs[M][1]> {
    // UnaryMethods<NodeRpcs> maps each M to exactly this; TypeScript cannot see it through the generic index.
    const def = csiServices().node.methods[method] as unknown as UnaryMethod<NodeRpcs[M][0], NodeRpcs[M][1]>;
    return this.#unary(method, def, request, this.#nodeTimeoutMs);
  }

  // ---------------------------------------------------------------- lifecycle

  get closed(): boolean {
    return this.#closed;
  }

  /** How many times a changed socket file made the client open a new channel. */
  get reconnects(): number {
    return this.#reconnects;
  }

  /** Closes the channel; later calls fail with a CsiCallError without a code. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#channel.client.close();
  }

  /** An answer the client refused: the error names the driver, its socket and the method. */
  #invalidAnswer(method: CsiRpcMethod, code: number, what: string): CsiCallError {
    return new CsiCallError(method, code, `invalid ${method} answer from ${this.#driver}: ${what}`);
  }

  /**
   * The response decoder for one call: refuses an answer over the method's bound before decoding
   * it, and records why it refused (grpc-js then fails the call with INTERNAL, which the callback
   * replaces with that reason).
   */
  #decoder<Res>(method: CsiRpcMethod, def: Pick<UnaryMethod<unknown, Res>, 'responseDeserialize'>): { readonly decode: (bytes: Buffer) => Res; readonly refused: () => CsiCallError | undefined } {
    let refused: CsiCallError | undefined;
    const limit = SMALL_ANSWERS.has(method) ? MAX_NODE_ANSWER_BYTES : MAX_CSI_MESSAGE_BYTES;
    return {
      decode: (bytes) => {
        if (bytes.length > limit) {
          refused = this.#invalidAnswer(method, GrpcStatus.RESOURCE_EXHAUSTED, `the answer is ${bytes.length} bytes, more than the ${limit} a ${method} answer may have`);
          throw refused;
        }
        try {
          return def.responseDeserialize(bytes);
        } catch (err) {
          refused = this.#invalidAnswer(method, GrpcStatus.INTERNAL, `${bytes.length} bytes that are not a csi.v1 ${method}Response: ${message(err)}`);
          throw refused;
        }
      },
      refused: () => refused,
    };
  }

  /** A failed call's error: the decoder's or grpc-js' refusal of the answer named as such, else the status as it came. */
  #callError(method: CsiRpcMethod, err: unknown, refused: CsiCallError | undefined): CsiCallError {
    if (refused !== undefined) return refused;
    if (!isServiceError(err)) return new CsiCallError(method, undefined, message(err));
    if (REFUSED_BY_GRPC_JS.some((r) => r.code === err.code && r.details.test(err.details))) return this.#invalidAnswer(method, err.code, err.details);
    return new CsiCallError(method, err.code, err.details);
  }

  // ---------------------------------------------------------------- the channel

  #openChannel(socket: string | undefined): Channel {
    return { client: new grpc.Client(this.endpoint, grpc.credentials.createInsecure(), this.#channelOptions), socket };
  }

  /**
   * The channel for the next call: the one the client has while the socket file is the one it was
   * opened for (or cannot be told), else a new one. The old channel is closed: grpc-js lets the
   * calls in flight on it finish over its connection, and starts none.
   */
  async #channelForCall(): Promise<grpc.Client> {
    const socket = await this.#socketCheck.call();
    const current = this.#channel;
    if (socket === undefined || this.#closed || current.socket === socket) return current.client;
    if (current.socket === undefined) {
      current.socket = socket;
      return current.client;
    }
    current.client.close();
    this.#channel = this.#openChannel(socket);
    this.#reconnects++;
    return this.#channel.client;
  }

  // ---------------------------------------------------------------- the call

  /**
   * One unary call with a deadline. `request` may be a thunk so that a request that cannot be
   * encoded (both access types) rejects with a local CsiCallError instead of throwing.
   */
  #unary<Req, Res>(
    method: CsiRpcMethod,
    def: UnaryMethod<Req, Res>,
    request: MessageInit<Req> | (() => MessageInit<Req>),
    timeoutMs: number,
  ): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      if (this.#closed) {
        reject(new CsiCallError(method, undefined, `CSI client for ${this.endpoint} is closed`));
        return;
      }
      let argument: MessageInit<Req>;
      try {
        argument = typeof request === 'function' ? request() : request;
      } catch (err) {
        reject(new CsiCallError(method, undefined, message(err)));
        return;
      }
      void this.#channelForCall().then((client) => {
        if (this.#closed) {
          reject(new CsiCallError(method, undefined, `CSI client for ${this.endpoint} is closed`));
          return;
        }
        // grpc-js takes an absolute deadline, read from the wall clock, and turns it into a timer
        // (libuv's monotonic clock) as the call starts: a wall clock stepped later does not move it.
        const options: grpc.CallOptions = { deadline: Date.now() + timeoutMs };
        const decoder = this.#decoder(method, def);
        try {
          client.makeUnaryRequest(def.path, def.requestSerialize, decoder.decode, argument, new grpc.Metadata(), options, (err, value) => {
            if (err !== null) {
              reject(this.#callError(method, err, decoder.refused()));
            } else if (value === undefined) {
              reject(new CsiCallError(method, GrpcStatus.INTERNAL, 'empty response'));
            } else {
              resolve(value);
            }
          });
        } catch (err) {
          // grpc-js throws synchronously only for a shut-down channel or bad call options.
          reject(new CsiCallError(method, undefined, message(err)));
        }
      });
    });
  }
}

// ------------------------------------------------------------------------------ registry

/**
 * Registered drivers by name → endpoint (kubelet's csiDrivers store, fed by plugin
 * registration). A driver's client is created on first use and kept until the driver is
 * unregistered or re-registered at another endpoint.
 */
export class GrpcCsiDriverRegistry implements CsiDriverRegistry {
  readonly #options: GrpcCsiClientOptions;
  readonly #endpoints = new Map<string, string>();
  readonly #clients = new Map<string, GrpcCsiClient>();

  constructor(options: GrpcCsiClientOptions = {}) {
    this.#options = options;
  }

  /** Registers (or moves) a driver. Throws {@link InvalidCsiEndpointError} for a bad endpoint. */
  register(driverName: string, endpoint: string): void {
    if (driverName === '') throw new Error('CSI driver name must not be empty');
    const normalized = normalizeEndpoint(endpoint);
    if (this.#endpoints.get(driverName) === normalized) return;
    this.#dropClient(driverName);
    this.#endpoints.set(driverName, normalized);
  }

  /** Forgets a driver and closes its client; false when it was not registered. */
  unregister(driverName: string): boolean {
    this.#dropClient(driverName);
    return this.#endpoints.delete(driverName);
  }

  endpoint(driverName: string): string | undefined {
    return this.#endpoints.get(driverName);
  }

  drivers(): string[] {
    return [...this.#endpoints.keys()].sort();
  }

  client(driverName: string): GrpcCsiClient | undefined {
    const endpoint = this.#endpoints.get(driverName);
    if (endpoint === undefined) return undefined;
    let c = this.#clients.get(driverName);
    if (c === undefined) {
      c = new GrpcCsiClient(endpoint, { ...this.#options, driverName });
      this.#clients.set(driverName, c);
    }
    return c;
  }

  /** Closes every client (registrations stay; a later client() opens a new one). */
  close(): void {
    for (const name of [...this.#clients.keys()]) this.#dropClient(name);
  }

  #dropClient(driverName: string): void {
    this.#clients.get(driverName)?.close();
    this.#clients.delete(driverName);
  }
}
