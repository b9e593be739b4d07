/**
 * Strict schemas of the two prometheus-operator kinds deploy/ uses (monitoring.coreos.com/v1
 * PodMonitor and PrometheusRule), for test/unit/deploy: kubernetes-models has no schema for them.
 * Only the fields deploy/ uses, with the operator's API names and types; an unknown or misspelt
 * field fails (.strict()), as the typed round trip does for the built-in kinds. Not a *.test.ts.
 */
import { z } from 'zod';

const metadata = z
  .object({
    name: z.string().regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/),
    namespace: z.string().optional(),
    labels: z.record(z.string()).optional(),
    annotations: z.record(z.string()).optional(),
  })
  .strict();

const relabelConfig = z
  .object({
    sourceLabels: z.array(z.string().regex(/^[a-zA-Z_][a-zA-Z0-9_]*$/)).optional(),
    separator: z.string().optional(),
    targetLabel: z.string().optional(),
    regex: z.string().optional(),
    modulus: z.number().int().optional(),
    replacement: z.string().optional(),
    action: z.enum(['replace', 'keep', 'drop', 'hashmod', 'labelmap', 'labeldrop', 'labelkeep', 'lowercase', 'uppercase', 'keepequal', 'dropequal']).optional(),
  })
  .strict();

/** A Prometheus duration as the operator's CRDs accept it (e.g. 30s, 1m, 1h30m). */
const duration = z.string().regex(/^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$/);

export const podMonitorSchema = z
  .object({
    apiVersion: z.literal('monitoring.coreos.com/v1'),
    kind: z.literal('PodMonitor'),
    metadata,
    spec: z
      .object({
        selector: z.object({ matchLabels: z.record(z.string()).optional() }).strict(),
        namespaceSelector: z.object({ any: z.boolean().optional(), matchNames: z.array(z.string()).optional() }).strict().optional(),
        podMetricsEndpoints: z
          .array(
            z
              .object({
                port: z.string().optional(),
                path: z.string().startsWith('/').optional(),
                scheme: z.enum(['http', 'https']).optional(),
                interval: duration.optional(),
                scrapeTimeout: duration.optional(),
                honorLabels: z.boolean().optional(),
                relabelings: z.array(relabelConfig).optional(),
                metricRelabelings: z.array(relabelConfig).optional(),
              })
              .strict(),
          )
          .min(1),
      })
      .strict(),
  })
  .strict();

const rule = z
  .object({
    alert: z.string().regex(/^[a-zA-Z_][a-zA-Z0-9_]*$/).optional(),
    record: z.string().optional(),
    expr: z.string().min(1),
    for: duration.optional(),
    labels: z.record(z.string()).optional(),
    annotations: z.record(z.string()).optional(),
  })
  .strict()
  .refine((r) => (r.alert === undefined) !== (r.record === undefined), 'a rule is an alert or a record, not both');

export const ruleGroupsSchema = z
  .object({
    groups: z.array(z.object({ name: z.string().min(1), interval: duration.optional(), rules: z.array(rule).min(1) }).strict()).min(1),
  })
  .strict();

export const prometheusRuleSchema = z
  .object({
    apiVersion: z.literal('monitoring.coreos.com/v1'),
    kind: z.literal('PrometheusRule'),
    metadata,
    spec: ruleGroupsSchema,
  })
  .strict();

/** The schema of a prometheus-operator object, by kind (undefined for any other kind). */
export function prometheusOperatorSchema(kind: string): z.ZodTypeAny | undefined {
  return kind === 'PodMonitor' ? podMonitorSchema : kind === 'PrometheusRule' ? prometheusRuleSchema : undefined;
}
