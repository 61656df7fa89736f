# Statistics of the benchmark scripts (POSIX awk: Debian's mawk runs it). lib.sh loads it before
# its own programs; a script may load it too:  awk -f "$here/stats.awk" -f program.awk
#   median(list)          median of a space-separated list of numbers ("NA" if empty or if any
#                         entry is NA: a failed run must not vanish into a median)
#   worst(list, better)   the worst entry: the largest if better == "low" (latency), the
#                         smallest if better == "high" (bandwidth, rate); "NA" as for median
#   worst_index(list, better)  its position in the list (1-based; 0 if NA)
#   ratio(a, b)           a / b to two decimals, two digits below 0.1 ("NA" when either is NA
#                         or b is zero)
#   human(bytes)          1, 512, 4K, 64K, 1M, 64M (sizes that are not a whole K or M stay bytes)
function sort_numbers(a, n,   i, j, t) {
  for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
}
function median(list,   n, a, i) {
  n = split(list, a, " ")
  if (n == 0) return "NA"
  for (i = 1; i <= n; i++) if (a[i] == "NA") return "NA"
  sort_numbers(a, n)
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function worst_index(list, better,   n, a, i, w) {
  n = split(list, a, " ")
  if (n == 0) return 0
  w = 1
  for (i = 1; i <= n; i++) {
    if (a[i] == "NA") return 0
    if ((better == "high") ? (a[i] + 0 < a[w] + 0) : (a[i] + 0 > a[w] + 0)) w = i
  }
  return w
}
function worst(list, better,   a, w) {
  w = worst_index(list, better)
  if (w == 0) return "NA"
  split(list, a, " ")
  return a[w]
}
function ratio(a, b) {
  if (a == "NA" || b == "NA" || a == "" || b == "" || b + 0 == 0) return "NA"
  return (a / b >= 0.1 || a + 0 == 0) ? sprintf("%.2f", a / b) : sprintf("%.2g", a / b)
}
function human(b) {
  if (b !~ /^[0-9]+$/) return b
  if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) "M"
  if (b >= 1024 && b % 1024 == 0) return (b / 1024) "K"
  return b
}
# Three significant digits at least, no exponent for the magnitudes benchmarks print.
function num(x) {
  if (x == "NA" || x == "") return "NA"
  x += 0
  if (x >= 1000) return sprintf("%.0f", x)
  if (x >= 100) return sprintf("%.1f", x)
  if (x >= 10) return sprintf("%.2f", x)
  return sprintf("%.3f", x)
}
