/**
 * The body of a worker thread of the swarm (swarm.ts): runs the tasks its parent posts, one at a
 * time, and posts each answer back. Started by swarmWorkerMain.js, or, in the CLI bundle, by the
 * bundle's runSwarmWorker (src/cli/main.ts).
 */
import { parentPort } from 'node:worker_threads';

import { runTask, type SwarmTask } from './swarm.js';

export function serveSwarmTasks(): void {
  const port = parentPort;
  if (port === null) throw new Error('a swarm worker runs as a worker thread of nodevol explore --generate');
  port.on('message', (task: SwarmTask) => {
    void runTask(task).then((answer) => port.postMessage(answer));
  });
}
