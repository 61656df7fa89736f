csv = "/tmp/bench_big/net_tagged_lat.csv"
set terminal pngcairo size 1400,550 noenhanced
set output "/tmp/bench_big/net_tagged_lat.png"
set datafile separator ","
set datafile missing "NA"
set multiplot layout 1,2 title "exanet (network backend) vs tcp;ofi_rxm across two namespaces: tagged_lat\nvm, AMD EPYC, 2 cpus, 6.18.44-fc-v1045; 2026-12-03 07:45 UTC; REPEAT=7"
set logscale x 2
set format x "%.0b%B"
set xlabel "message size (bytes)"
set offsets graph 0.02, graph 0.02, 0, 0
set grid
set key top left font ",9"
set logscale y
set ylabel "latency (usec, one way)"
plot csv using 1:"exanet_us" with linespoints lt 1 dt 1 title "exanet median", csv using 1:"exanet_before_us" with linespoints lt 2 dt 1 title "exanet_before median", csv using 1:"tcp_us" with linespoints lt 3 dt 1 title "tcp median"
set logscale y
set format y "%g"
set ylabel "ratio (log scale)"
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 3 lw 2
plot csv using 1:"exanet_over_tcp" with linespoints lc "black" dt 1 title "exanet/tcp median", csv using 1:"exanet_over_exanet_before" with linespoints lc "red" dt 1 title "exanet/exanet_before median"
unset multiplot
