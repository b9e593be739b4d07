// Mutation killer: with KEP-6058's gate only, generated workloads 1..10 break exactly the
// invariants they break on the shipped engine (killers.ts). When a fix changes them, refresh this
// table from the failure's "actual" value after checking that only the intended workloads changed.
import { workloadsTest } from './killers.js';

workloadsTest('KEP-6058 only', {
  1: ['converges'],
  3: ['converges'],
  6: ['converges'],
  9: ['converges'],
});
