# mixed_precision_ops_gemm.gp - written by tunebench (lib/report/plot.c). Re-render by hand with:
#     cd <this directory> && gnuplot mixed_precision_ops_gemm.gp
# Set tb_png, tb_svg or tb_pdf (gnuplot -e "tb_pdf=''" ...) to change an
# output name; an empty name skips that format.
if (!exists("tb_png")) tb_png = 'mixed_precision_ops_gemm.png'
if (!exists("tb_svg")) tb_svg = 'mixed_precision_ops_gemm.svg'
if (!exists("tb_pdf")) tb_pdf = 'mixed_precision_ops_gemm.pdf'
set encoding utf8
$s0 << EOD
512 1.71312 1.58006 1.85739
1024 5.37522 1.46816 19.6797
2048 13.761 11.7691 16.09
4096 16.2555 15.4383 17.116
EOD
$s1 << EOD
512 1.66649 0.857539 3.23857
1024 5.42945 1.27839 23.0594
2048 13.1673 9.81087 17.672
4096 15.168 14.7484 15.5995
EOD
set title 'Square GEMM, low precision over fp32, NVIDIA H200 (0 threads)'
set xlabel 'n (n x n x n)'
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
            $s0 using 1:2:3:4 with yerrorlines linestyle 3 title 'bf16, gemm time', \
            $s1 using 1:2:3:4 with yerrorlines linestyle 5 title 'fp16, gemm time', \
            1 with lines dashtype 2 linewidth 1.5 linecolor rgb 'gray30' title 'no change'
        unset output
    }
}
