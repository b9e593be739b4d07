/**
 * Loads proto/csi/v1/csi.proto once with @grpc/proto-loader and exposes its three services:
 * the raw definitions grpc-js' Server wants, and per-RPC typed (de)serializers for the client
 * and the server handlers.
 *
 * The .proto is not compiled into dist/: it is read at run time from the repository (or
 * package) root, found relative to this module: dist/src/adapters/grpc/loader.js sits four levels
 * below the root (../../../../proto), src/adapters/grpc/loader.ts three; {@link protoRoot} walks up
 * from import.meta.url until it finds proto/csi/v1/csi.proto.
 *
 * `google/protobuf/wrappers.proto` (for ProbeResponse.ready) is one of the well-known files
 * protobufjs bundles; protobufjs' own directory is also on the include path (it ships
 * descriptor.proto and friends as files), so an import of any google/protobuf file resolves
 * without a copy in proto/.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

import type * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

import { CSI_RPCS_BY_SERVICE } from '../../ports/csi.js';
import type { ControllerRpcs, IdentityRpcs, MessageInit, NodeRpcs } from './messages.js';

/** The proto file, relative to the proto root. */
export const CSI_PROTO_FILE = 'csi/v1/csi.proto';

/** The options every nodevol component loads csi.proto with (the shapes in messages.ts follow them). */
export const CSI_LOADER_OPTIONS: Readonly<protoLoader.Options> = Object.freeze({
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});

let cachedRoot: string | undefined;

/**
 * The directory holding csi/v1/csi.proto: `<root>/proto`, where root is the first ancestor of
 * this module's directory that has it (dist/src/adapters/grpc → ../../../../proto;
 * src/adapters/grpc → ../../../proto).
 */
export function protoRoot(): string {
  if (cachedRoot !== undefined) return cachedRoot;
  const here = path.dirname(fileURLToPath(import.meta.url));
  let dir = here;
  for (;;) {
    const candidate = path.join(dir, 'proto');
    if (existsSync(path.join(candidate, CSI_PROTO_FILE))) {
      cachedRoot = candidate;
      return candidate;
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`cannot find proto/${CSI_PROTO_FILE} above ${here}`);
    dir = parent;
  }
}

/** Absolute path of proto/csi/v1/csi.proto. */
export function protoPath(): string {
  return path.join(protoRoot(), CSI_PROTO_FILE);
}

/** protobufjs' package directory (it ships google/protobuf/*.proto), seen from proto-loader. */
function protobufjsDir(): string | undefined {
  try {
    const fromHere = createRequire(import.meta.url);
    const loaderEntry = fromHere.resolve('@grpc/proto-loader');
    return path.dirname(createRequire(loaderEntry).resolve('protobufjs/package.json'));
  } catch {
    return undefined;
  }
}

/** One unary RPC: its path and typed (de)serializers for both ends. */
export interface UnaryMethod<Req, Res> {
  /** '/csi.v1.Node/NodeStageVolume' */
  readonly path: string;
  readonly requestSerialize: (request: MessageInit<Req>) => Buffer;
  readonly requestDeserialize: (bytes: Buffer) => Req;
  readonly responseSerialize: (response: MessageInit<Res>) => Buffer;
  readonly responseDeserialize: (bytes: Buffer) => Res;
}

export type UnaryMethods<Rpcs> = {
  readonly [M in keyof Rpcs]: Rpcs[M] extends [infer Req, infer Res] ? UnaryMethod<Req, Res> : never;
};

export interface CsiService<Rpcs> {
  /** 'csi.v1.Node' */
  readonly name: string;
  /** For grpc.Server#addService. */
  readonly definition: grpc.ServiceDefinition;
  readonly methods: UnaryMethods<Rpcs>;
}

export interface CsiServices {
  readonly identity: CsiService<IdentityRpcs>;
  readonly controller: CsiService<ControllerRpcs>;
  readonly node: CsiService<NodeRpcs>;
  /** The whole package definition (message types included), e.g. for encoding tests. */
  readonly packageDefinition: protoLoader.PackageDefinition;
}

const RPC_NAMES = CSI_RPCS_BY_SERVICE;

function isServiceDefinition(value: unknown): value is protoLoader.ServiceDefinition {
  return typeof value === 'object' && value !== null && !('format' in value);
}

function service<Rpcs>(pkg: protoLoader.PackageDefinition, name: keyof typeof RPC_NAMES): CsiService<Rpcs> {
  const fullName = `csi.v1.${name}`;
  const def = pkg[fullName];
  if (!isServiceDefinition(def)) throw new Error(`${protoPath()} has no service ${fullName}`);
  const methods: Record<string, UnaryMethod<unknown, unknown>> = {};
  for (const rpc of RPC_NAMES[name]) {
    const m = def[rpc];
    if (m === undefined || m.requestStream || m.responseStream || m.path !== `/${fullName}/${rpc}`) {
      throw new Error(`${protoPath()}: ${fullName}.${rpc} is missing or not a unary RPC`);
    }
    methods[rpc] = {
      path: m.path,
      requestSerialize: (v) => m.requestSerialize(v),
      requestDeserialize: (b) => m.requestDeserialize(b),
      responseSerialize: (v) => m.responseSerialize(v),
      responseDeserialize: (b) => m.responseDeserialize(b),
    };
  }
  // The loop above checked every RPC of Rpcs; the decoded shapes are messages.ts' contract
  // with the loader options.
  return { name: fullName, definition: def, methods: methods as unknown as UnaryMethods<Rpcs> };
}

let loaded: CsiServices | undefined;

/** The csi.v1 services, loaded on first use (synchronously, once per process). */
export function csiServices(): CsiServices {
  if (loaded !== undefined) return loaded;
  const includeDirs = [protoRoot()];
  const pbjs = protobufjsDir();
  if (pbjs !== undefined) includeDirs.push(pbjs);
  const packageDefinition = protoLoader.loadSync(CSI_PROTO_FILE, { ...CSI_LOADER_OPTIONS, includeDirs });
  loaded = {
    identity: service<IdentityRpcs>(packageDefinition, 'Identity'),
    controller: service<ControllerRpcs>(packageDefinition, 'Controller'),
    node: service<NodeRpcs>(packageDefinition, 'Node'),
    packageDefinition,
  };
  return loaded;
}
