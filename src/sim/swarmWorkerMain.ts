/** The script of a swarm worker thread when nodevol runs from its compiled modules (not the bundle). */
import { serveSwarmTasks } from './swarmWorker.js';

serveSwarmTasks();
