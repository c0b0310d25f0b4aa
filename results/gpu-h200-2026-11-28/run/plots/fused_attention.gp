# fused_attention.gp - written by tunebench (lib/report/plot.c). Re-render by hand with:
#     cd <this directory> && gnuplot fused_attention.gp
# Set tb_png, tb_svg or tb_pdf (gnuplot -e "tb_pdf=''" ...) to change an
# output name; an empty name skips that format.
if (!exists("tb_png")) tb_png = 'fused_attention.png'
if (!exists("tb_svg")) tb_svg = 'fused_attention.svg'
if (!exists("tb_pdf")) tb_pdf = 'fused_attention.pdf'
set encoding utf8
$s0 << EOD
128 0.0264627
256 0.0258357
512 0.029201
1024 0.0586446
2048 0.278391
4096 0.888884
EOD
$s1 << EOD
128 0.0388236
256 0.0747829
512 0.146069
1024 0.289281
2048 0.693552
4096 1.95692
EOD
$s2 << EOD
128 0.0764472
256 0.0848359
512 0.0927946
1024 0.223185
2048 0.676802
4096 2.17811
EOD
$s3 << EOD
128 0.159345
256 0.305146
512 0.595431
1024 1.17622
2048 2.86162
4096 8.79481
EOD
$s4 << EOD
128 0.0257179
256 0.0269755
512 0.0322645
1024 0.0656827
2048 0.297584
4096 0.970151
EOD
$s5 << EOD
128 0.0389265
256 0.0749963
512 0.146395
1024 0.288829
2048 0.622124
4096 1.51531
EOD
$s6 << EOD
128 0.0845862
256 0.076776
512 0.0829732
1024 0.230533
2048 0.695658
4096 2.25984
EOD
$s7 << EOD
128 0.159539
256 0.304847
512 0.593562
1024 1.17549
2048 2.58194
4096 6.53873
EOD
set title 'Attention time (B=1, H=4, D=64), NVIDIA H200 (0 threads)'
set xlabel 'sequence length'
set logscale x 2
set format x '2^%L'
set ylabel 'time (ms)'
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
