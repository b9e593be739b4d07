/**
 * "Examples:" blocks for the commands whose modules other work owns (agent, mock-driver), added
 * from main.ts so that every command's --help ends with examples (kubectl's convention).
 */
import type { Command } from 'commander';
import { addHelpAfter, examples } from './flags.js';

const EXAMPLES: Readonly<Record<string, readonly (readonly [string, string])[]>> = {
  agent: [
    ['Run the volume manager on a sandbox node with the KEP-6058 gate on', 'nodevol agent --root-dir /tmp/node/root --node-name node-1 --cluster-dir /tmp/node/cluster \\\n  --feature-gates CSIGlobalMountReconstruction=true'],
    ['A driver whose socket is not under the root dir', 'nodevol agent --root-dir /tmp/node/root --node-name node-1 --cluster-dir /tmp/node/cluster \\\n  --csi-endpoint mock.csi.nodevol.io=unix:///run/mock/csi.sock'],
  ],
  'mock-driver': [
    [
      'A driver with one volume, its calls journalled (its socket where the agent looks by default)',
      'R=/tmp/node/root\nnodevol mock-driver --endpoint unix://$R/plugins/mock.csi.nodevol.io/csi.sock \\\n  --node-id node-1 --driver-name mock.csi.nodevol.io --state-dir /tmp/node/driver \\\n  --journal /tmp/node/journal.jsonl --volume pv-demo',
    ],
    [
      'The same driver holding every NodeUnstageVolume (faults are re-read when the file changes)',
      "R=/tmp/node/root\necho 'faults: [{method: NodeUnstageVolume, hang: true}]' > /tmp/node/faults.yaml\nnodevol mock-driver --endpoint unix://$R/plugins/mock.csi.nodevol.io/csi.sock \\\n  --node-id node-1 --driver-name mock.csi.nodevol.io --state-dir /tmp/node/driver --faults /tmp/node/faults.yaml",
    ],
  ],
};

/** Appends the examples above to the commands of `program` that have none of their own. */
export function addOwnedElsewhereExamples(program: Command): void {
  for (const cmd of program.commands) {
    const items = EXAMPLES[cmd.name()];
    if (items !== undefined) addHelpAfter(cmd, examples(items));
  }
}
