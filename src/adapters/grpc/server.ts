/**
 * A csi.v1 gRPC server on a unix socket, for nodevol's mock driver and for tests: the
 * Identity and Node services (Controller optional) backed by plain async handlers.
 *
 * - Binds only `unix:///abs/path.sock`. A socket file left by a dead server is removed at
 *   start; a live one (something accepts connections on it), or a path that is not a socket,
 *   makes the start fail.
 * - A handler receives the decoded request (messages.ts) and returns the response (any
 *   {@link MessageInit}; `{}` for the empty ones). A handler that throws an error carrying a
 *   gRPC status code — a {@link CsiCallError}, a {@link CsiStatusError}, or anything with a
 *   numeric `code` in 1..16 — answers that status with the error's `details` (else its
 *   message); any other throw answers UNKNOWN. A handler not given answers UNIMPLEMENTED.
 * - Each call has an AbortSignal that fires when the client cancels or its deadline passes,
 *   and when the server closes.
 */
import type { Stats } from 'node:fs';
import { realpath } from 'node:fs/promises';
import * as net from 'node:net';
import * as posix from 'node:path/posix';

import * as grpc from '@grpc/grpc-js';

import { GrpcStatus, type CsiRpcMethod } from '../../ports/csi.js';
import { Beneath } from '../node/beneath.js';
import { normalizeEndpoint, unixSocketPath } from './endpoint.js';
import { csiServices, type CsiService } from './loader.js';
import type * as wire from './messages.js';
import type { ControllerRpcs, IdentityRpcs, MessageInit, NodeRpcs } from './messages.js';

export interface CsiCallContext {
  readonly method: CsiRpcMethod;
  /** Aborted when the call is cancelled (client gone, deadline passed) or the server closes. */
  readonly signal: AbortSignal;
  readonly metadata: grpc.Metadata;
}

export type CsiHandler<Req, Res> = (request: Req, context: CsiCallContext) => Promise<MessageInit<Res>>;

export interface IdentityHandlers {
  getPluginInfo: CsiHandler<wire.GetPluginInfoRequest, wire.GetPluginInfoResponse>;
  getPluginCapabilities: CsiHandler<wire.GetPluginCapabilitiesRequest, wire.GetPluginCapabilitiesResponse>;
  probe: CsiHandler<wire.ProbeRequest, wire.ProbeResponse>;
}

export interface NodeHandlers {
  nodeStageVolume: CsiHandler<wire.NodeStageVolumeRequest, wire.NodeStageVolumeResponse>;
  nodeUnstageVolume: CsiHandler<wire.NodeUnstageVolumeRequest, wire.NodeUnstageVolumeResponse>;
  nodePublishVolume: CsiHandler<wire.NodePublishVolumeRequest, wire.NodePublishVolumeResponse>;
  nodeUnpublishVolume: CsiHandler<wire.NodeUnpublishVolumeRequest, wire.NodeUnpublishVolumeResponse>;
  nodeGetVolumeStats: CsiHandler<wire.NodeGetVolumeStatsRequest, wire.NodeGetVolumeStatsResponse>;
  nodeExpandVolume: CsiHandler<wire.NodeExpandVolumeRequest, wire.NodeExpandVolumeResponse>;
  nodeGetCapabilities: CsiHandler<wire.NodeGetCapabilitiesRequest, wire.NodeGetCapabilitiesResponse>;
  nodeGetInfo: CsiHandler<wire.NodeGetInfoRequest, wire.NodeGetInfoResponse>;
}

export interface ControllerHandlers {
  createVolume: CsiHandler<wire.CreateVolumeRequest, wire.CreateVolumeResponse>;
  deleteVolume: CsiHandler<wire.DeleteVolumeRequest, wire.DeleteVolumeResponse>;
  controllerPublishVolume: CsiHandler<wire.ControllerPublishVolumeRequest, wire.ControllerPublishVolumeResponse>;
  controllerUnpublishVolume: CsiHandler<wire.ControllerUnpublishVolumeRequest, wire.ControllerUnpublishVolumeResponse>;
  validateVolumeCapabilities: CsiHandler<wire.ValidateVolumeCapabilitiesRequest, wire.ValidateVolumeCapabilitiesResponse>;
  listVolumes: CsiHandler<wire.ListVolumesRequest, wire.ListVolumesResponse>;
  controllerGetCapabilities: CsiHandler<wire.ControllerGetCapabilitiesRequest, wire.ControllerGetCapabilitiesResponse>;
}

export interface CsiServerHandlers {
  readonly identity: Partial<IdentityHandlers>;
  readonly node: Partial<NodeHandlers>;
  /** Without it the Controller service is not served at all (calls answer UNIMPLEMENTED). */
  readonly controller?: Partial<ControllerHandlers>;
}

export interface CsiServerOptions {
  /** How long close() lets running calls finish before cutting them off. Default 5000 ms. */
  readonly shutdownGraceMs?: number;
}

export interface CsiServer {
  /** unix:///abs/path.sock, normalized. */
  readonly endpoint: string;
  readonly socketPath: string;
  /** Stops accepting calls, aborts running handlers' signals, waits (bounded), removes the socket. Idempotent. */
  close(): Promise<void>;
}

/** An error a handler can throw to answer a given gRPC status. */
export class CsiStatusError extends Error {
  override readonly name = 'CsiStatusError';
  constructor(
    readonly code: number,
    readonly details: string,
  ) {
    super(details);
  }
}

/** The status a handler's throw answers. */
export function statusOfError(err: unknown): { code: number; details: string } {
  if (typeof err === 'object' && err !== null) {
    const { code, details } = err as { code?: unknown; details?: unknown };
    if (typeof code === 'number' && Number.isInteger(code) && code > GrpcStatus.OK && code <= GrpcStatus.UNAUTHENTICATED) {
      return { code, details: typeof details === 'string' ? details : err instanceof Error ? err.message : '' };
    }
  }
  return { code: GrpcStatus.UNKNOWN, details: err instanceof Error ? err.message : String(err) };
}

type Implementation = Record<string, grpc.UntypedHandleCall>;

function toGrpcStatus(code: number): grpc.status {
  const name = grpc.status[code];
  return typeof name === 'string' ? grpc.status[name as keyof typeof grpc.status] : grpc.status.UNKNOWN;
}

/** A handler with its types erased, as the dispatch below holds it. */
type ErasedHandler = (request: unknown, context: CsiCallContext) => Promise<object>;

function implement<H>(
  bindings: Readonly<Record<string, keyof H & string>>,
  handlers: Partial<H>,
  inflight: Set<AbortController>,
): Implementation {
  const impl: Implementation = {};
  for (const [rpc, handlerName] of Object.entries(bindings)) {
    const handler = handlers[handlerName] as ErasedHandler | undefined;
    const method = rpc as CsiRpcMethod;
    // The request is what the service definition decodes: messages.ts' shape of that RPC.
    const call: grpc.handleUnaryCall<unknown, object> = (serverCall, callback) => {
      if (handler === undefined) {
        callback({ code: grpc.status.UNIMPLEMENTED, details: `${method} is not implemented by this CSI server` });
        return;
      }
      const abort = new AbortController();
      inflight.add(abort);
      serverCall.once('cancelled', () => abort.abort(new Error(`${method} cancelled by the client`)));
      let result: Promise<object>;
      try {
        // Called on its object, so class instances (a mock driver) can serve as handlers.
        result = handler.call(handlers, serverCall.request, { method, signal: abort.signal, metadata: serverCall.metadata });
      } catch (err) {
        result = Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
      result.then(
        (response) => {
          inflight.delete(abort);
          callback(null, response);
        },
        (err: unknown) => {
          inflight.delete(abort);
          const { code, details } = statusOfError(err);
          callback({ code: toGrpcStatus(code), details });
        },
      );
    };
    impl[rpc] = call;
  }
  return impl;
}

const IDENTITY_BINDINGS = {
  GetPluginInfo: 'getPluginInfo',
  GetPluginCapabilities: 'getPluginCapabilities',
  Probe: 'probe',
} as const satisfies { readonly [M in keyof IdentityRpcs]: keyof IdentityHandlers };

const NODE_BINDINGS = {
  NodeStageVolume: 'nodeStageVolume',
  NodeUnstageVolume: 'nodeUnstageVolume',
  NodePublishVolume: 'nodePublishVolume',
  NodeUnpublishVolume: 'nodeUnpublishVolume',
  NodeGetVolumeStats: 'nodeGetVolumeStats',
  NodeExpandVolume: 'nodeExpandVolume',
  NodeGetCapabilities: 'nodeGetCapabilities',
  NodeGetInfo: 'nodeGetInfo',
} as const satisfies { readonly [M in keyof NodeRpcs]: keyof NodeHandlers };

const CONTROLLER_BINDINGS = {
  CreateVolume: 'createVolume',
  DeleteVolume: 'deleteVolume',
  ControllerPublishVolume: 'controllerPublishVolume',
  ControllerUnpublishVolume: 'controllerUnpublishVolume',
  ValidateVolumeCapabilities: 'validateVolumeCapabilities',
  ListVolumes: 'listVolumes',
  ControllerGetCapabilities: 'controllerGetCapabilities',
} as const satisfies { readonly [M in keyof ControllerRpcs]: keyof ControllerHandlers };

/** Whether something accepts connections on the unix socket at `socketPath`. */
function isListening(socketPath: string): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    const s = net.connect(socketPath);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', (err: NodeJS.ErrnoException) => {
      s.destroy();
      if (err.code === 'ECONNREFUSED' || err.code === 'ENOENT') resolve(false);
      else reject(err);
    });
  });
}

/** Removes a socket file nobody listens on; refuses a live socket or a non-socket. */
async function clearStaleSocket(socketPath: string): Promise<void> {
  let live = false;
  let notSocket = false;
  await unlinkSocketIf(socketPath, async (st) => {
    notSocket = !st.isSocket();
    live = !notSocket && (await isListening(socketPath));
    return !notSocket && !live;
  });
  if (notSocket) throw new Error(`cannot serve CSI on ${socketPath}: it exists and is not a socket`);
  if (live) throw new Error(`cannot serve CSI on ${socketPath}: another server is listening on it`);
}

async function removeSocketFile(socketPath: string): Promise<void> {
  await unlinkSocketIf(socketPath, (st) => st.isSocket());
}

/**
 * Unlinks the socket file when `test` accepts it: the check and the unlink are made in the one
 * directory that holds it (opened by its real path), so a parent swapped for a symlink meanwhile
 * cannot turn the removal onto another file of that name elsewhere.
 */
async function unlinkSocketIf(socketPath: string, test: (st: Stats) => boolean | Promise<boolean>): Promise<void> {
  let dir: string;
  try {
    dir = await realpath(posix.dirname(socketPath));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const name = posix.basename(socketPath);
  const beneath = new Beneath([dir]);
  await beneath.unlinkIf(socketPath, { root: dir, parents: [], name }, test);
}

function addService<Rpcs, H>(
  server: grpc.Server,
  service: CsiService<Rpcs>,
  bindings: { readonly [M in keyof Rpcs & string]: keyof H & string },
  handlers: Partial<H>,
  inflight: Set<AbortController>,
): void {
  server.addService(service.definition, implement(bindings, handlers, inflight));
}

/** Serves csi.v1 on `endpoint` (unix:///abs/path.sock). Resolves once the socket accepts calls. */
export async function startCsiServer(endpoint: string, handlers: CsiServerHandlers, options: CsiServerOptions = {}): Promise<CsiServer> {
  const socketPath = unixSocketPath(endpoint);
  const canonical = normalizeEndpoint(endpoint);
  const graceMs = options.shutdownGraceMs ?? 5000;
  if (!Number.isFinite(graceMs) || graceMs < 0) throw new RangeError(`shutdownGraceMs must be >= 0, got ${graceMs}`);
  const services = csiServices();

  await clearStaleSocket(socketPath);

  const inflight = new Set<AbortController>();
  const server = new grpc.Server();
  addService(server, services.identity, IDENTITY_BINDINGS, handlers.identity, inflight);
  addService(server, services.node, NODE_BINDINGS, handlers.node, inflight);
  if (handlers.controller !== undefined) addService(server, services.controller, CONTROLLER_BINDINGS, handlers.controller, inflight);

  try {
    await new Promise<void>((resolve, reject) => {
      server.bindAsync(canonical, grpc.ServerCredentials.createInsecure(), (err) => {
        if (err === null) resolve();
        else reject(err);
      });
    });
  } catch (err) {
    server.forceShutdown();
    throw new Error(`cannot serve CSI on ${canonical}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      for (const abort of inflight) abort.abort(new Error('CSI server closing'));
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        force.unref();
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
      await removeSocketFile(socketPath);
    })();
    return closing;
  };

  return { endpoint: canonical, socketPath, close };
}
