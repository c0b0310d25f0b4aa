# gelu.gp - written by tunebench (lib/report/plot.c). Re-render by hand with:
#     cd <this directory> && gnuplot gelu.gp
# Set tb_png, tb_svg or tb_pdf (gnuplot -e "tb_pdf=''" ...) to change an
# output name; an empty name skips that format.
if (!exists("tb_png")) tb_png = 'gelu.png'
if (!exists("tb_svg")) tb_svg = 'gelu.svg'
if (!exists("tb_pdf")) tb_pdf = 'gelu.pdf'
set encoding utf8
$s0 << EOD
1024 0.808821
2048 1.63404
4096 3.26944
8192 5.89646
16384 12.6529
32768 26.1245
65536 48.3276
131072 98.8245
262144 207.671
524288 404.084
1048576 750.031
2097152 1367.74
4194304 2229.4
8388608 2403.89
16777216 3122.79
33554432 3638.32
67108864 3939.89
EOD
$s1 << EOD
1024 0.369614
2048 0.762008
4096 1.59648
8192 3.02052
16384 6.33893
32768 13.0462
65536 26.1699
131072 51.7049
262144 105.271
524288 197.179
1048576 394.018
2097152 635.64
4194304 660.756
8388608 654.317
16777216 690.517
33554432 720.615
67108864 731.275
EOD
$s2 << EOD
1024 1.71991
2048 3.9707
4096 7.90464
8192 15.0261
16384 29.8477
32768 63.2119
65536 124.408
131072 237.403
262144 514.627
524288 999.034
1048576 2088.39
2097152 3229.5
4194304 3908.69
8388608 3408.43
16777216 3683.59
33554432 3896.95
67108864 3950.55
EOD
$s3 << EOD
1024 0.272648
2048 0.606051
4096 1.19845
8192 2.40568
16384 4.79569
32768 9.75318
65536 19.1585
131072 38.1174
262144 77.0886
524288 153.49
1048576 313.089
2097152 454.837
4194304 525.613
8388608 521.088
16777216 494.915
33554432 515.97
67108864 524.089
EOD
$s4 << EOD
1024 2.90733
2048 5.81539
4096 11.1531
8192 23.6593
16384 46.8813
32768 92.9152
65536 194.394
131072 381.376
262144 750.921
524288 1503.41
1048576 2670.45
2097152 3618.46
4194304 3443.63
8388608 3712.21
16777216 3953.94
33554432 4078.12
67108864 4092.81
EOD
set title 'GELU effective bandwidth, NVIDIA H200 (0 threads)'
set xlabel 'elements'
set logscale x 2
set format x '2^%L'
set ylabel 'effective bandwidth (GB/s)'
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
            $s0 using 1:2 with linespoints linestyle 1 title 'copy, copy time', \
            $s1 using 1:2 with linespoints linestyle 5 title 'unfused, fwd time', \
            $s2 using 1:2 with linespoints linestyle 8 title 'fused, fwd time', \
            $s3 using 1:2 with linespoints linestyle 6 title 'unfused, bwd time', \
            $s4 using 1:2 with linespoints linestyle 1 title 'fused, bwd time'
        unset output
    }
}
