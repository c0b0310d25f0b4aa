# gelu.gp - written by tunebench (lib/report/plot.c). Re-render by hand with:
#     cd <this directory> && gnuplot gelu.gp
# Set tb_png, tb_svg or tb_pdf (gnuplot -e "tb_pdf=''" ...) to change an
# output name; an empty name skips that format.
if (!exists("tb_png")) tb_png = 'gelu.png'
if (!exists("tb_svg")) tb_svg = 'gelu.svg'
if (!exists("tb_pdf")) tb_pdf = 'gelu.pdf'
set encoding utf8
$s0 << EOD
1024 0.778638
2048 1.4786
4096 2.9576
8192 5.95969
16384 11.3807
32768 23.585
65536 46.6131
131072 86.2756
262144 202.55
524288 350.432
1048576 668.811
2097152 1234.79
4194304 1903.49
8388608 1925.67
16777216 2394.62
33554432 2645.5
67108864 2823.79
EOD
$s1 << EOD
1024 0.371595
2048 0.79662
4096 1.50285
8192 2.96028
16384 5.43345
32768 11.719
65536 24.0066
131072 50.7441
262144 98.0467
524288 184.509
1048576 398.277
2097152 533.945
4194304 528.597
8388608 478.714
16777216 504.587
33554432 518.708
67108864 522.368
EOD
$s2 << EOD
1024 1.63402
2048 3.67426
4096 6.61082
8192 14.2587
16384 25.7233
32768 60.6772
65536 119.299
131072 223.022
262144 465.732
524288 825.232
1048576 1854.89
2097152 3191.8
4194304 3508.49
8388608 2547.06
16777216 2727.34
33554432 2815.62
67108864 2827.3
EOD
$s3 << EOD
1024 0.270805
2048 0.543815
4096 1.1914
8192 2.3071
16384 4.49703
32768 8.85796
65536 17.6524
131072 36.3426
262144 75.0129
524288 146.402
1048576 287.176
2097152 395.086
4194304 440.079
8388608 381.682
16777216 362.701
33554432 372.501
67108864 375.006
EOD
$s4 << EOD
1024 2.4453
2048 5.37067
4096 10.3631
8192 22.9356
16384 43.3047
32768 89.8867
65536 189.487
131072 359.077
262144 735.656
524288 1323.79
1048576 2472.83
2097152 3579.91
4194304 2648.25
8388608 2702.88
16777216 2845.32
33554432 2882.46
67108864 2882.41
EOD
set title 'GELU effective bandwidth, NVIDIA H100 80GB HBM3 (0 threads)'
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
