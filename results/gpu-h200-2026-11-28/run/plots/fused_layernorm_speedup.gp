# fused_layernorm_speedup.gp - written by tunebench (lib/report/plot.c). Re-render by hand with:
#     cd <this directory> && gnuplot fused_layernorm_speedup.gp
# Set tb_png, tb_svg or tb_pdf (gnuplot -e "tb_pdf=''" ...) to change an
# output name; an empty name skips that format.
if (!exists("tb_png")) tb_png = 'fused_layernorm_speedup.png'
if (!exists("tb_svg")) tb_svg = 'fused_layernorm_speedup.svg'
if (!exists("tb_pdf")) tb_pdf = 'fused_layernorm_speedup.pdf'
set encoding utf8
$s0 << EOD
786432 5.38845 5.22622 5.55571
3145728 4.78544 4.74453 4.8267
8388608 6.31568 6.19859 6.43499
4194304 8.22068 8.05259 8.39229
EOD
$s1 << EOD
786432 4.29469 2.90199 6.35576
3145728 4.56098 4.46917 4.65468
8388608 5.64072 5.22455 6.09005
4194304 5.50113 5.23674 5.77887
EOD
set title 'Layer norm fused over unfused (median, 95% CI), NVIDIA H200 (0 threads)'
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
