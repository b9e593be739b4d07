/**
 * A worker thread of the swarm (swarm.ts): runs the tasks its parent posts, one at a time, and
 * posts each answer back.
 */
import { parentPort } from 'node:worker_threads';

import { runTask, type SwarmTask } from './swarm.js';

const port = parentPort;
if (port === null) throw new Error('swarmWorker.js runs as a worker thread of nodevol explore --generate');
port.on('message', (task: SwarmTask) => {
  void runTask(task).then((answer) => port.postMessage(answer));
});
