# The steps of .ci/run, sourced by it (and by test/unit/ci/ciRun.test.ts), from the repository's
# root:
#
#   step NAME CMD...   runs CMD (a program, or a function of the caller, under `set -e`): prints
#                      what runs, a progress line every NODEVOL_CI_PROGRESS_SECONDS (default
#                      60) while it runs, and its time and exit status when it ends; its output
#                      is shown and kept in a log of its own; returns CMD's exit status.
#
# When the shell exits (after a failure too) the summary is printed: scripts/ciSummary.ts (the
# table step -> seconds, the whole run, the test counts of each step that ran tests, skipped
# suites included), or the bare table when there is no build of it. NODEVOL_CI_LOGS names the
# directory the logs go to (default: a new one under /tmp).

ci_progress_every=${NODEVOL_CI_PROGRESS_SECONDS:-60}
ci_logs=${NODEVOL_CI_LOGS:-$(mktemp -d /tmp/nodevol-ci.XXXXXX)}
mkdir -p "$ci_logs"
ci_start=$(date +%s)
ci_steps=0

ci_summary() {
  local rc=$?
  echo
  if [ -f dist/scripts/ciSummary.js ] && [ -s "$ci_logs/steps.tsv" ]; then
    node dist/scripts/ciSummary.js "$ci_logs/steps.tsv" "$(($(date +%s) - ci_start))" || true
  elif [ -s "$ci_logs/steps.tsv" ]; then
    echo "== CI summary (step, seconds, exit status; no dist/scripts/ciSummary.js for the test counts)"
    cut -f1-3 "$ci_logs/steps.tsv"
    echo "whole run	$(($(date +%s) - ci_start))"
  fi
  echo "== each step's output: $ci_logs"
  if [ "$rc" = 0 ]; then echo "== CI passed"; else echo "== CI FAILED (exit $rc)"; fi
}
trap ci_summary EXIT

step() {
  local name=$1 start log rc ticker
  shift
  ci_steps=$((ci_steps + 1))
  log="$ci_logs/$ci_steps-$(printf '%s' "$name" | tr -c 'A-Za-z0-9' '-').log"
  : >"$log"
  start=$(date +%s)
  echo "== step $ci_steps, $name: $*"
  # The progress lines: what runs, for how long, and the last line it printed. The ticker's
  # stderr is /dev/null from its fork on (the redirection is the group's, made before the fork):
  # a ticker stopped at once, before its trap is set, dies of bash's own TERM handling, and
  # bash 5.2 then prints "wait_for: No record of process N" into the step's output.
  {
  (
    s=
    trap 'kill "$s" 2>/dev/null; exit 0' TERM
    while :; do
      # Its own output closed: a sleep left running (a stop between its fork and `s=$!`) holds
      # no pipe of the run open.
      sleep "$ci_progress_every" </dev/null >/dev/null 2>&1 &
      s=$!
      wait "$s"
      printf '== step %d, %s: still running after %d s (%d lines of output; the last: %.120s)\n' \
        "$ci_steps" "$name" "$(($(date +%s) - start))" "$(wc -l <"$log")" "$(tail -n 1 "$log" | tr -d '\r')"
    done
  ) &
  } 2>/dev/null
  ticker=$!
  set +e
  (
    set -e
    "$@"
  ) 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  set -e
  # The ticker may not have set its trap yet (a step of no time): its status is not the step's.
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  printf '%s\t%d\t%d\t%s\n' "$name" "$(($(date +%s) - start))" "$rc" "$log" >>"$ci_logs/steps.tsv"
  echo "== step $ci_steps, $name: $(($(date +%s) - start)) s, exit $rc"
  return "$rc"
}
