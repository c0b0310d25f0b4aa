# gelu_speedup.gp - written by tunebench (lib/report/plot.c). Re-render by hand with:
#     cd <this directory> && gnuplot gelu_speedup.gp
# Set tb_png, tb_svg or tb_pdf (gnuplot -e "tb_pdf=''" ...) to change an
# output name; an empty name skips that format.
if (!exists("tb_png")) tb_png = 'gelu_speedup.png'
if (!exists("tb_svg")) tb_svg = 'gelu_speedup.svg'
if (!exists("tb_pdf")) tb_pdf = 'gelu_speedup.pdf'
set encoding utf8
$s0 << EOD
1024 4.80501 4.49408 5.13745
2048 4.99403 4.60977 5.41032
4096 4.93766 4.20102 5.80347
8192 4.95242 4.23158 5.79604
16384 4.94532 4.67038 5.23645
32768 4.70575 4.51752 4.90182
65536 4.8364 4.70661 4.96976
131072 4.90724 4.59959 5.23547
262144 4.80963 4.02293 5.75019
524288 4.76133 4.2767 5.30088
1048576 4.9694 4.56444 5.4103
2097152 5.10183 3.92014 6.63972
4194304 5.85355 3.98591 8.59629
8388608 5.20302 5.16507 5.24124
16777216 5.33449 5.31966 5.34937
33554432 5.4005 5.13041 5.68482
67108864 5.40221 5.34553 5.4595
EOD
$s1 << EOD
1024 9.63102 8.66355 10.7065
2048 9.50151 8.78335 10.2784
4096 9.30055 8.34763 10.3622
8192 9.76502 9.47447 10.0645
16384 9.81797 9.66764 9.97065
32768 9.62868 9.00095 10.3002
65536 9.86617 9.05557 10.7493
131072 9.77053 9.21205 10.3629
262144 9.61615 6.673 13.8574
524288 9.72375 7.47766 12.6445
1048576 8.55465 8.2785 8.84001
2097152 7.92603 7.48775 8.38997
4194304 6.55824 5.78179 7.43896
8388608 7.11145 6.67666 7.57456
16777216 7.9981 7.79764 8.20372
33554432 7.9012 7.67048 8.13886
67108864 7.81139 7.72642 7.8973
EOD
set title 'GELU fused over unfused (median, 95% CI), NVIDIA H200 (0 threads)'
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
