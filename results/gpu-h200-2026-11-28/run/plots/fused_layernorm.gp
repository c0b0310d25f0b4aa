# fused_layernorm.gp - written by tunebench (lib/report/plot.c). Re-render by hand with:
#     cd <this directory> && gnuplot fused_layernorm.gp
# Set tb_png, tb_svg or tb_pdf (gnuplot -e "tb_pdf=''" ...) to change an
# output name; an empty name skips that format.
if (!exists("tb_png")) tb_png = 'fused_layernorm.png'
if (!exists("tb_svg")) tb_svg = 'fused_layernorm.svg'
if (!exists("tb_pdf")) tb_pdf = 'fused_layernorm.pdf'
set encoding utf8
$s0 << EOD
786432 555.801
3145728 1824.51
8388608 2519.27
4194304 2277.84
EOD
$s1 << EOD
786432 183.29
3145728 300.14
8388608 326.448
4194304 354.1
EOD
$s2 << EOD
786432 1010.41
3145728 1436.41
8388608 2057.6
4194304 2929.43
EOD
$s3 << EOD
786432 167.403
3145728 243.508
8388608 262.945
4194304 268.46
EOD
$s4 << EOD
786432 705.525
3145728 1109.55
8388608 1486.02
4194304 1475.9
EOD
set title 'Layer norm effective bandwidth, NVIDIA H200 (0 threads)'
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
