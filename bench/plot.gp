# bench/plot.gp - latency and throughput against message size, safeverbs / raw verbs / perftest;
# scaling.png from the scaling stage (scale_*.dat, when there are any).
#   gnuplot -e "dir='DATA_DIR'; out='OUT_DIR'" bench/plot.gp
# DATA_DIR holds lat_<op>.dat and bw_<op>.dat from build/bench_report
# (size, sfv, raw, perftest [, then the p99 columns]; "?" = no figure).
set datafile missing "?"
set terminal pngcairo size 1400,1000 font "sans,11"
set logscale xy 2
set grid
set key top left
set format x "%.0s%cB"
set style line 1 lc rgb "#1f77b4" lw 2 pt 7 ps 1.0
set style line 2 lc rgb "#d62728" lw 2 pt 5 ps 1.0 dt 2
set style line 3 lc rgb "#2ca02c" lw 2 pt 9 ps 1.1 dt 3
set style line 4 lc rgb "#1f77b4" lw 1 pt 6 ps 0.7 dt 4
set style line 5 lc rgb "#d62728" lw 1 pt 4 ps 0.7 dt 4

set output out."/latency.png"
set multiplot layout 2,2 title "Latency against message size (rxe in a TCG guest; median, thin: p99)"
set logscale y 10
set ylabel "microseconds"
set xlabel "message size"
do for [op in "send write write_imm read"] {
    set title op.(op eq "read" ? " (round trip)" : " (half round trip)")
    plot dir."/lat_".op.".dat" using 1:2 with linespoints ls 1 title "safeverbs", \
         "" using 1:3 with linespoints ls 2 title "raw verbs", \
         "" using 1:4 with linespoints ls 3 title "perftest", \
         "" using 1:5 with linespoints ls 4 title "safeverbs p99", \
         "" using 1:6 with linespoints ls 5 title "raw p99"
}
unset multiplot

set output out."/throughput.png"
set terminal pngcairo size 1500,500 font "sans,11"
set multiplot layout 1,3 title "Throughput against message size (rxe in a TCG guest)"
set ylabel "MiB/s"
set logscale y 2
set key bottom right
do for [op in "write read send"] {
    set title op
    plot dir."/bw_".op.".dat" using 1:2 with linespoints ls 1 title "safeverbs", \
         "" using 1:3 with linespoints ls 2 title "raw verbs", \
         "" using 1:4 with linespoints ls 3 title "perftest"
}
unset multiplot

# scaling.png: the scale_*.dat files (build/bench_report), when the scaling stage ran
if (strlen(system("ls ".dir."/scale_connect.dat 2>/dev/null")) > 0) {
    set output out."/scaling.png"
    set terminal pngcairo size 1400,1000 font "sans,11"
    set multiplot layout 2,2 title "How cost grows with the work (rxe in a TCG guest)"
    set logscale x 2
    unset logscale y
    set format x "%g"
    set key top left
    set title "node connect + barrier, slowest rank"
    set xlabel "ranks"
    set ylabel "ms"
    stats dir."/scale_connect.dat" using 2 every ::0::0 nooutput
    t2 = STATS_min # the first row: 2 ranks
    plot dir."/scale_connect.dat" using 1:2 with linespoints ls 1 title "safeverbs", \
         "" using 1:(t2 * $1 / 2) with lines ls 2 title "linear from 2 ranks (t(2) x ranks / 2)"
    set title "memory per channel (multi-channel, default desc)"
    set xlabel "channels"
    set ylabel "bytes per channel"
    plot dir."/scale_mem.dat" using 1:2 with linespoints ls 1 title "heap", \
         "" using 1:3 with linespoints ls 3 title "mapped (queues, CQ)"
    set title "message rate against peers (64 in flight)"
    set xlabel "channels of the multi-channel"
    set ylabel "thousand messages/s"
    plot dir."/scale_rate_peers.dat" using 1:2 with linespoints ls 1 title "safeverbs, 64 B sends"
    set title "message rate against depth (1 channel)"
    set xlabel "work requests in flight"
    plot dir."/scale_rate_depth.dat" using 1:2 with linespoints ls 1 title "safeverbs, 64 B sends"
    unset multiplot
}
