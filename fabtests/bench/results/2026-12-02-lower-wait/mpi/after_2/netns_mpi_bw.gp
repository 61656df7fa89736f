csv = "/work/main/fabtests/bench/results/2026-12-02-lower-wait/mpi/after_2/netns_mpi_bw.csv"
set terminal pngcairo size 1400,550 noenhanced
set output "/work/main/fabtests/bench/results/2026-12-02-lower-wait/mpi/after_2/netns_mpi_bw.png"
set datafile separator ","
set datafile missing "NA"
set multiplot layout 1,2 title "Open MPI across two network namespaces, 1 rank each: streaming bandwidth, window 64 (median and worst placement)\nvm, AMD EPYC, 2 cpus, 6.18.44-fc-v1045; 2026-12-02 20:56 UTC; REPEAT=5"
set logscale x 2
set format x "%.0b%B"
set xlabel "message size (bytes)"
set offsets graph 0.02, graph 0.02, 0, 0
set grid
set key top left font ",9"
set logscale y
set ylabel "bandwidth (MB/s)"
plot csv using 1:"exanet_MBps" with linespoints lt 1 dt 1 title "exanet median", csv using 1:"exanet_MBps_worst" with linespoints lt 1 dt 2 title "exanet worst placement", csv using 1:"ofi_tcp_MBps" with linespoints lt 2 dt 1 title "ofi_tcp median", csv using 1:"ofi_tcp_MBps_worst" with linespoints lt 2 dt 2 title "ofi_tcp worst placement"
set logscale y
set format y "%g"
set ylabel "ratio (log scale)"
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 3 lw 2
plot csv using 1:"exanet_over_ofi_tcp" with linespoints lc "black" dt 1 title "exanet/ofi_tcp median", csv using 1:"exanet_over_ofi_tcp_worst" with linespoints lc "black" dt 2 title "exanet/ofi_tcp worst"
unset multiplot
