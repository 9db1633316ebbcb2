# Shared by bench/pair and bench/better-auth/compare (sourced, not run).

# ms VALUE prints a duration as cmd/loadtest writes it (ns, µs, ms or s) in milliseconds.
ms() { awk -v v="$1" 'BEGIN { if (v ~ /ns$/) { sub(/ns$/, "", v); v /= 1e6 } else if (v ~ /µs$/) { sub(/µs$/, "", v); v /= 1000 } else if (v ~ /ms$/) sub(/ms$/, "", v); else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 } print v }'; }
