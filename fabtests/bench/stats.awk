# Helpers the comparison scripts load before their own program (awk -f stats.awk -f /dev/stdin):
# the median of a space-separated list of numbers ("NA" if empty), and a ratio to two decimals
# ("NA" when either side is missing or the divisor is zero).
function median(list,   n, a, i, j, t) {
  n = split(list, a, " ")
  if (n == 0) return "NA"
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return a[int((n + 1) / 2)]
}
function ratio(a, b) { return (a == "NA" || b == "NA" || b == 0) ? "NA" : sprintf("%.2f", a / b) }
