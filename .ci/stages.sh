# Stage timing for .ci/run (sourced): each stage's seconds, a table at the end, and a warning
# when the whole run passes WARN_AFTER seconds.
#
#   stage "default suite" .venv/bin/python -m pytest ...   # runs it, records its seconds
#   stage_report                                            # the table (.ci/run's EXIT trap)
#
# A stage records "name<TAB>start<TAB>end<TAB>exit status" in $STAGE_FILE, seconds from
# $CI_START, so stages run in a background lane are recorded too (the file, not a variable,
# crosses the subshell). CI's limit is 90 minutes; its target is 45 (2,700 s).

CI_START=${CI_START:-$(date +%s)}
STAGE_FILE=${STAGE_FILE:-$(mktemp "${TMPDIR:-/tmp}/ci_stages.XXXXXX")}
WARN_AFTER=${WARN_AFTER:-3600}
export CI_START STAGE_FILE

stage() {  # stage NAME COMMAND...: run COMMAND, record NAME's start, end and exit status
    local name=$1 begin rc=0
    shift
    begin=$(( $(date +%s) - CI_START ))
    echo "==> [$(date -u +%H:%M:%S)] $name"
    "$@" || rc=$?
    printf '%s\t%s\t%s\t%s\n' "$name" "$begin" "$(( $(date +%s) - CI_START ))" "$rc" \
        >>"$STAGE_FILE"
    echo "<== $name: $(( $(date +%s) - CI_START - begin )) s (exit $rc)"
    return "$rc"
}

stage_report() {  # the table of stages and the total; a warning line past WARN_AFTER
    local total=$(( $(date +%s) - CI_START ))
    echo
    echo "CI stages (seconds from the start; a background lane's stages overlap the others):"
    printf '  %-44s %6s %6s %6s\n' stage start end seconds
    sort -t $'\t' -k2,2n "$STAGE_FILE" | while IFS=$'\t' read -r name begin end rc; do
        printf '  %-44s %6s %6s %6s%s\n' "$name" "$begin" "$end" "$(( end - begin ))" \
            "$([ "$rc" = 0 ] || echo "  FAILED (exit $rc)")"
    done
    printf '  %-44s %6s %6s %6s\n' total 0 "$total" "$total"
    if [ "$total" -gt "$WARN_AFTER" ]; then
        echo "WARNING: CI took $total s, past $(( WARN_AFTER / 60 )) minutes (target 2,700 s," \
             "limit 5,400 s); slowest stages: $(awk -F '\t' '{ print $3 - $2 "\t" $1 }' \
             "$STAGE_FILE" | sort -rn | head -3 | awk -F '\t' '{ printf "%s%s (%s s)",
             (NR > 1 ? ", " : ""), $2, $1 }')"
    fi
}

stop_background() {  # end what a failed run left in the background (a lane and its children)
    local pid
    for pid in $(jobs -p); do
        pkill -TERM -P "$pid" 2>/dev/null || true
        kill -TERM "$pid" 2>/dev/null || true
    done
}
