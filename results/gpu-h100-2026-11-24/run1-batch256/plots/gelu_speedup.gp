# gelu_speedup.gp - written by tunebench (lib/report/plot.c). Re-render by hand with:
#     cd <this directory> && gnuplot gelu_speedup.gp
# Set tb_png, tb_svg or tb_pdf (gnuplot -e "tb_pdf=''" ...) to change an
# output name; an empty name skips that format.
if (!exists("tb_png")) tb_png = 'gelu_speedup.png'
if (!exists("tb_svg")) tb_svg = 'gelu_speedup.svg'
if (!exists("tb_pdf")) tb_pdf = 'gelu_speedup.pdf'
set encoding utf8
$s0 << EOD
1024 4.73826 3.01715 7.44117
2048 4.83553 4.54088 5.1493
4096 4.63541 4.42187 4.85927
8192 4.96414 4.51431 5.45879
16384 4.59489 4.05082 5.21204
32768 4.71766 4.46531 4.98426
65536 5.10604 3.64053 7.16149
131072 4.57531 2.01142 10.4073
262144 4.75453 3.50888 6.44237
524288 4.68443 4.40217 4.98478
1048576 4.80581 4.70196 4.91195
2097152 5.92445 5.73655 6.11851
4194304 6.6289 6.28974 6.98635
8388608 5.31747 5.22832 5.40814
16777216 5.40561 5.36978 5.44168
33554432 5.43381 5.3119 5.55852
67108864 5.41269 5.29304 5.53504
EOD
$s1 << EOD
1024 9.49966 8.97958 10.0499
2048 9.88325 8.59585 11.3635
4096 9.19619 8.74779 9.66758
8192 10.1438 9.48742 10.8456
16384 9.55845 9.07527 10.0674
32768 9.6294 9.06275 10.2315
65536 9.8856 4.36889 22.3684
131072 9.72144 9.22348 10.2463
262144 9.71624 8.91055 10.5948
524288 9.37371 9.01768 9.74378
1048576 8.83274 5.40303 14.4395
2097152 9.00778 6.86047 11.8272
4194304 5.98862 5.45672 6.57236
8388608 7.08069 7.0734 7.08799
16777216 7.84206 7.66354 8.02473
33554432 7.7376 7.61788 7.8592
67108864 7.68549 7.62656 7.74489
EOD
set title 'GELU fused over unfused (median, 95% CI), NVIDIA H100 80GB HBM3 (0 threads)'
set xlabel 'elements'
set logscale x 2
set format x '2^%L'
set ylabel 'speedup (x)'
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
            $s0 using 1:2:3:4 with yerrorlines linestyle 8 title 'fused, fwd time', \
            $s1 using 1:2:3:4 with yerrorlines linestyle 1 title 'fused, bwd time', \
            1 with lines dashtype 2 linewidth 1.5 linecolor rgb 'gray30' title 'no change'
        unset output
    }
}
