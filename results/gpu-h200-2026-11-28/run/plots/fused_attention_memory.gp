# fused_attention_memory.gp - written by tunebench (lib/report/plot.c). Re-render by hand with:
#     cd <this directory> && gnuplot fused_attention_memory.gp
# Set tb_png, tb_svg or tb_pdf (gnuplot -e "tb_pdf=''" ...) to change an
# output name; an empty name skips that format.
if (!exists("tb_png")) tb_png = 'fused_attention_memory.png'
if (!exists("tb_svg")) tb_svg = 'fused_attention_memory.svg'
if (!exists("tb_pdf")) tb_pdf = 'fused_attention_memory.pdf'
set encoding utf8
$s0 << EOD
128 262144
256 1048576
512 4194304
1024 16777216
2048 67108864
4096 268435456
EOD
$s1 << EOD
128 2048
256 4096
512 8192
1024 16384
2048 32768
4096 65536
EOD
$s2 << EOD
128 524288
256 2097152
512 8388608
1024 33554432
2048 134217728
4096 536870912
EOD
$s3 << EOD
128 4096
256 8192
512 16384
1024 32768
2048 65536
4096 131072
EOD
$s4 << EOD
128 262144
256 1048576
512 4194304
1024 16777216
2048 67108864
4096 268435456
EOD
$s5 << EOD
128 2048
256 4096
512 8192
1024 16384
2048 32768
4096 65536
EOD
$s6 << EOD
128 524288
256 2097152
512 8388608
1024 33554432
2048 134217728
4096 536870912
EOD
$s7 << EOD
128 4096
256 8192
512 16384
1024 32768
2048 65536
4096 131072
EOD
set title 'Attention peak memory per call, NVIDIA H200 (0 threads)'
set xlabel 'sequence length'
set logscale x 2
set format x '2^%L'
set ylabel 'bytes'
set logscale y 10
set grid
set key top left box opaque
set errorbars small
set offsets graph 0.03, graph 0.03, graph 0.05, 0
set style line 1 linecolor rgb '#0072b2' linewidth 2 pointtype 5 pointsize 1
set style line 2 linecolor rgb '#d55e00' linewidth 2 pointtype 7 pointsize 1
set style line 3 linecolor rgb '#009e73' linewidth 2 pointtype 9 pointsize 1
set style line 4 linecolor rgb '#cc79a7' linewidth 2 pointtype 11 pointsize 1
set style line 5 linecolor rgb '#e69f00' linewidth 2 pointtype 5 pointsize 1
set style line 6 linecolor rgb '#56b4e9' linewidth 2 pointtype 7 pointsize 1
set style line 7 linecolor rgb '#f0e442' linewidth 2 pointtype 9 pointsize 1
set style line 8 linecolor rgb '#000000' linewidth 2 pointtype 11 pointsize 1
do for [tb_i = 1:3] {
    tb_out = (tb_i == 1 ? tb_png : tb_i == 2 ? tb_svg : tb_pdf)
    if (tb_out ne '') {
        if (tb_i == 1) { set terminal pngcairo size 1200,800 noenhanced font 'Sans,12' }
        if (tb_i == 2) { set terminal svg size 1200,800 noenhanced font 'Sans,12' }
        if (tb_i == 3) { set terminal pdfcairo size 8in,5.33in noenhanced font 'Sans,10' }
        set output tb_out
        plot \
            $s0 using 1:2 with linespoints linestyle 1 title 'manual, fwd time', \
            $s1 using 1:2 with linespoints linestyle 5 title 'fused, fwd time', \
            $s2 using 1:2 with linespoints linestyle 2 title 'manual, fwd+bwd time', \
            $s3 using 1:2 with linespoints linestyle 6 title 'fused, fwd+bwd time', \
            $s4 using 1:2 with linespoints linestyle 3 title 'manual, fwd time, causal', \
            $s5 using 1:2 with linespoints linestyle 7 title 'fused, fwd time, causal', \
            $s6 using 1:2 with linespoints linestyle 4 title 'manual, fwd+bwd time, causal', \
            $s7 using 1:2 with linespoints linestyle 8 title 'fused, fwd+bwd time, causal'
        unset output
    }
}
