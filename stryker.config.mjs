// StrykerJS configuration of `npm run mutate` (docs/benchmarks.md, "Mutation score"). The options
// are built by scripts/mutate/config.ts, compiled to dist/: run `npm run mutate`, which builds first.
import { strykerConfig } from './dist/scripts/mutate/config.js';

export default strykerConfig();
