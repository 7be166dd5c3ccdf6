# Sourced by the checkpoint and failure tests: a work directory (removed at exit), the embedding classifier
# partitioned for 2 workers and 2 parameter servers in $work/plan.pb, and run ARGS... running it
# on Zipf data (bounded by TIMEOUT seconds, default 120).
prism="$1"; source_dir="$2"
work=$(mktemp -d)
# Tasks a failed test left behind go with the directory.
trap 'pkill -KILL -f "$work/plan.pb" 2>/dev/null || true; rm -rf "$work"' EXIT
data=zipf:100000,tokens=20,classes=10
timeout 60 "$prism" partition "$source_dir/models/embedding_classifier.prism" --cluster local:2,ps=2 \
  --batch 64 -o "$work/plan.pb" >/dev/null || exit 1
run() { timeout "${TIMEOUT:-120}" "$prism" run "$work/plan.pb" --data $data --no-eval --quiet "$@"; }
