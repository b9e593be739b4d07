/**
 * The metric names a PromQL expression selects, for the checks of deploy/monitoring (not a
 * parser: promtool parses; this finds names). Strings, label matchers, ranges, grouping label
 * lists and numbers are removed; every identifier left is a PromQL function, aggregation or
 * keyword, or a metric name. Not a *.test.ts.
 */

/** PromQL's functions, aggregation operators and keywords (Prometheus 2.x). */
export const PROMQL_WORDS: ReadonlySet<string> = new Set([
  // aggregation operators and their modifiers
  'sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values', 'bottomk', 'topk', 'quantile',
  'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset', 'atan2',
  // functions
  'abs', 'absent', 'absent_over_time', 'ceil', 'changes', 'clamp', 'clamp_max', 'clamp_min', 'day_of_month',
  'day_of_week', 'day_of_year', 'days_in_month', 'delta', 'deriv', 'exp', 'floor', 'histogram_quantile',
  'holt_winters', 'hour', 'idelta', 'increase', 'irate', 'label_join', 'label_replace', 'ln', 'log2', 'log10',
  'minute', 'month', 'predict_linear', 'rate', 'resets', 'round', 'scalar', 'sgn', 'sort', 'sort_desc', 'sqrt',
  'time', 'timestamp', 'vector', 'year', 'avg_over_time', 'min_over_time', 'max_over_time', 'sum_over_time',
  'count_over_time', 'quantile_over_time', 'stddev_over_time', 'stdvar_over_time', 'last_over_time',
  'present_over_time', 'inf', 'nan',
]);

/** The identifiers of `expr` that are not PromQL words: the metric names it selects. */
export function metricNamesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' $1 ')
    .replace(/\b\d+(\.\d+)?([eE][-+]?\d+)?[smhdwy]?\b/g, ' ');
  const names = [...stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)].map((m) => m[0]).filter((w) => !PROMQL_WORDS.has(w.toLowerCase()));
  return [...new Set(names)];
}
