/**
 * The kinds of cluster finding, in a module of their own: the outputs name them without loading
 * the cluster state module (and its schema library) on a node-only audit.
 */
export type ClusterFindingKind = 'at-risk' | 'attached-elsewhere' | 'pod-gone';
export const CLUSTER_FINDING_KINDS: readonly ClusterFindingKind[] = ['at-risk', 'attached-elsewhere', 'pod-gone'];
