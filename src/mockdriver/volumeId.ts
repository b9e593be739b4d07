/**
 * The volume id the mock driver's CreateVolume gives a name (`nodevol mock-driver --volume NAME`
 * prints it): `mock-` and the first 16 hex digits of sha256(name). The simulator's generated
 * workloads use the same ids, so that their fault rules name the volumes the real mock driver
 * process provisions.
 */
import { createHash } from 'node:crypto';

export function mockVolumeId(name: string): string {
  return `mock-${createHash('sha256').update(name, 'utf8').digest('hex').slice(0, 16)}`;
}
