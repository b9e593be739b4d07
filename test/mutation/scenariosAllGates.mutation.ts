// Mutation killer: the built-in scenarios with every gate on break no invariant (killers.ts).
import { scenariosTest } from './killers.js';

scenariosTest('every gate on', {});
