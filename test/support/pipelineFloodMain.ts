/**
 * The pipelining flood as a process: `node pipelineFloodMain.js PORT CONNECTIONS REQUESTS PATH`.
 * Writes `started` once every first socket has written its requests, and `opened N` (sockets
 * opened, the replacements included) when SIGTERM stops it. Started by FloodProcess
 * (hostileHttp.ts), it ends with its stdin. Not named *.test.ts: npm test runs only *.test.js files.
 */
import { PipelineFlood } from './hostileHttp.js';

const [port, connections, requests, path] = process.argv.slice(2);
const flood = new PipelineFlood(Number(port), { connections: Number(connections), requests: Number(requests), path: path ?? '/metrics' });
await flood.firstRound;
process.stdout.write('started\n');
// The test process is gone (its end of stdin closed): so is the flood.
process.stdin.once('close', () => process.exit(0));
process.stdin.resume();
process.once('SIGTERM', () => {
  flood.stop();
  process.stdout.write(`opened ${flood.opened}\n`, () => process.exit(0));
});
