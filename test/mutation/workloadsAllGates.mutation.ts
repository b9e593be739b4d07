// Mutation killer: generated workloads 1..10 with every gate on break no invariant (killers.ts).
import { workloadsTest } from './killers.js';

workloadsTest('every gate on', {});
