// Mutation killer: with KEP-6058's gate only, each built-in scenario breaks exactly the invariants
// it breaks on the shipped engine (killers.ts). When a fix changes them, refresh this table from
// the failure's "actual" value after checking that only the intended scenarios changed.
import { scenariosTest } from './killers.js';

scenariosTest('KEP-6058 only', {
  'alpha-gap': ['converges', 'no-unstage-in-use'],
  'block-publish-timeout-then-failed': ['converges', 'no-unstage-in-use'],
  'block-restaged-during-unstage': ['stage-after-unstage'],
  'driver-never-returns': ['converges'],
  'kep-story-2': ['converges', 'no-unstage-in-use'],
  'listed-restage-fails': ['nothing-removed-early'],
  'lost-pod-file-read-only-root': ['converges', 'no-unstage-in-use'],
  'mount-group-check-fails': ['converges'],
  'publish-failed-cleanup-read-only': ['converges'],
  'published-then-failed': ['converges'],
  'reconstruction-cleanup-retry': ['converges'],
  'reconstruction-failed-pod-deleted': ['converges'],
  'rewanted-during-unstage': ['stage-after-unstage'],
  'rwop-pod-replaced-unreconstructed': ['converges', 'rwop-one-pod'],
  'staged-then-failed': ['converges', 'in-use-reported'],
});
