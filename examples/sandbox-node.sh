#!/usr/bin/env bash
# A sandbox node: the mock CSI driver, the nodevol agent and one pod on a temp root dir, then
# KEP-6058 story 1 (kill -9 during NodeUnstageVolume) seen by `nodevol audit` and recovered by
# the agent with CSIGlobalMountReconstruction. Needs root (real bind mounts); run it in a private
# mount namespace so nothing leaks:   sudo unshare --mount --propagation private --fork examples/sandbox-node.sh
set -euo pipefail
cd "$(dirname "$0")/.."
nodevol() { node bin/nodevol.js "$@"; }
in_use() { node -e 'process.exit(require(process.argv[1]).volumesInUse.length > 0 ? 0 : 1)' "$T/cluster/node-status.json"; }
waitfor() { for _ in $(seq 100); do if eval "$1"; then return 0; fi; sleep 0.1; done; echo "timed out: $1" >&2; return 1; }

T=$(mktemp -d /tmp/nodevol-sandbox.XXXX)
D=mock.csi.nodevol.io
DRIVER_PID= AGENT_PID=
cleanup() { kill $AGENT_PID $DRIVER_PID 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
mkdir -p "$T/root" "$T/cluster/manifests"
echo "sandbox: $T"

start_driver() {
  node bin/nodevol.js mock-driver --endpoint "unix://$T/root/plugins/$D/csi.sock" --node-id node-1 --driver-name $D \
    --state-dir "$T/driver" --journal "$T/journal.jsonl" --faults "$T/faults.yaml" "$@" >>"$T/driver.out" 2>>"$T/driver.log" &
  DRIVER_PID=$!
}
start_agent() {
  node bin/nodevol.js agent --root-dir "$T/root" --node-name node-1 --cluster-dir "$T/cluster" \
    --node-status-update-frequency 1s --metrics-bind-address 127.0.0.1:0 -v 2 "$@" 2>>"$T/agent.log" &
  AGENT_PID=$!
}

# 1. A driver with one provisioned volume.
start_driver --volume pv-demo
waitfor '[ -s "$T/driver.out" ]'
VOL=$(awk '{print $2}' "$T/driver.out")
NAME="kubernetes.io/csi/$D^$VOL"

# 2. The cluster: a CSIDriver, a PV and its PVC, a pod on node-1; the volume attached to node-1.
cat >"$T/cluster/manifests/storage.yaml" <<YAML
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: $D}
spec: {attachRequired: true}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-demo}
spec: {accessModes: [ReadWriteOnce], csi: {driver: $D, volumeHandle: $VOL}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: demo, namespace: default}
spec: {volumeName: pv-demo}
YAML
cat >"$T/cluster/manifests/pod.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: demo, namespace: default, uid: 11111111-2222-3333-4444-555555555555}
spec:
  nodeName: node-1
  containers: [{name: app, image: busybox, volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: demo}}]
YAML
echo "{\"volumesAttached\": [{\"name\": \"$NAME\", \"devicePath\": \"\"}], \"volumesInUse\": []}" >"$T/cluster/node-status.json"

# 3. The agent stages and publishes the volume and reports it in use.
start_agent
waitfor 'grep -q "\"method\":\"NodePublishVolume\"" "$T/journal.jsonl" 2>/dev/null' && waitfor in_use
echo "--- mounted:"; grep "$T" /proc/self/mountinfo | awk '{print "  " $5}'
nodevol audit --root-dir "$T/root"

# 4. Story 1: the pod is deleted, NodeUnstageVolume hangs, kubelet dies (kill -9).
echo 'faults: [{method: NodeUnstageVolume, hang: true}]' >"$T/faults.yaml"
rm "$T/cluster/manifests/pod.yaml"
waitfor 'grep -q "\"phase\":\"held\"" "$T/journal.jsonl"'
kill -9 $AGENT_PID; wait $AGENT_PID 2>/dev/null || true
echo "--- kubelet killed during NodeUnstageVolume; the audit (exit 1 = orphaned):"
nodevol audit --root-dir "$T/root" || true
nodevol audit --root-dir "$T/root" --feature-gates CSIGlobalMountReconstruction=true -o json | grep -E '"verdict"|"recovered"'

# 5. The storage recovers (driver restarted without faults) and the agent comes back with the gate on.
: >"$T/faults.yaml"
kill -9 $DRIVER_PID; wait $DRIVER_PID 2>/dev/null || true
start_driver
start_agent --feature-gates CSIGlobalMountReconstruction=true
waitfor '[ ! -d "$T/root/plugins/kubernetes.io/csi/$D/$(printf %s "$VOL" | sha256sum | cut -c1-64)" ]'
waitfor '! in_use'
echo "--- recovered: unstaged, directory removed, volumesInUse empty"
grep -E "Global mount with no pod directory|UnmountDevice started" "$T/agent.log" | tail -2 | cut -c1-160
nodevol audit --root-dir "$T/root"
