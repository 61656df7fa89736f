csv = "/work/main/fabtests/bench/results/2026-12-07-shared-core/shared_ring.csv"
set terminal pngcairo size 1400,550 noenhanced
set output "/work/main/fabtests/bench/results/2026-12-07-shared-core/shared_ring.png"
set datafile separator ","
set datafile missing "NA"
set multiplot layout 1,2 title "MPI ring, 4 ranks on 2 cores\nvm, Intel(R) Xeon(R) Processor, 2 cpus, 6.18.44-fc-v1252; 2026-12-07 02:36 UTC; REPEAT=3"
set logscale x 2
set format x "%.0b%B"
set xlabel "message size (bytes)"
set offsets graph 0.02, graph 0.02, 0, 0
set grid
set key top left font ",9"
set logscale y
set ylabel "us per operation"
plot csv using 1:"exanet_us" with linespoints lt 1 dt 1 title "exanet median", csv using 1:"exanet_noyield_us" with linespoints lt 2 dt 1 title "exanet_noyield median", csv using 1:"vader_us" with linespoints lt 3 dt 1 title "vader median", csv using 1:"tcp_us" with linespoints lt 4 dt 1 title "tcp median"
set logscale y
set format y "%g"
set ylabel "ratio (log scale)"
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 3 lw 2
plot csv using 1:"exanet_over_vader" with linespoints lc "black" dt 1 title "exanet/vader median", csv using 1:"exanet_over_tcp" with linespoints lc "red" dt 1 title "exanet/tcp median", csv using 1:"exanet_noyield_over_vader" with linespoints lc "orange" dt 1 title "exanet_noyield/vader median", csv using 1:"exanet_noyield_over_tcp" with linespoints lc "brown" dt 1 title "exanet_noyield/tcp median"
unset multiplot
