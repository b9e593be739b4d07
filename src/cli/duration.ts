/** Go-style durations for kubelet-like flags: "10s", "500ms", "1m30s", "2h". */
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export function parseDuration(value: string): number {
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(value)) !== null) {
    total += Number(m[1]) * (UNIT_MS[m[2] ?? ''] ?? NaN);
    matched = re.lastIndex;
  }
  if (value === '' || matched !== value.length || !Number.isFinite(total)) {
    throw new Error(`invalid duration ${JSON.stringify(value)}: want e.g. 10s, 500ms, 1m30s`);
  }
  return total;
}
