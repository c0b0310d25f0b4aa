# fused_attention_speedup.gp - written by tunebench (lib/report/plot.c). Re-render by hand with:
#     cd <this directory> && gnuplot fused_attention_speedup.gp
# Set tb_png, tb_svg or tb_pdf (gnuplot -e "tb_pdf=''" ...) to change an
# output name; an empty name skips that format.
if (!exists("tb_png")) tb_png = 'fused_attention_speedup.png'
if (!exists("tb_svg")) tb_svg = 'fused_attention_speedup.svg'
if (!exists("tb_pdf")) tb_pdf = 'fused_attention_speedup.pdf'
set encoding utf8
$s0 << EOD
128 0.724563 0.612701 0.856849
256 0.367698 0.0851225 1.58832
512 0.203414 0.187326 0.220885
1024 0.202767 0.195498 0.210306
2048 0.401246 0.400848 0.401646
4096 0.453773 0.452427 0.455123
EOD
$s1 << EOD
128 0.502024 0.423908 0.594536
256 0.265849 0.0676311 1.04502
512 0.14774 0.131984 0.165376
1024 0.189603 0.188115 0.191102
2048 0.236643 0.236427 0.236859
4096 0.247605 0.247284 0.247926
EOD
$s2 << EOD
128 0.700669 0.618664 0.793544
256 0.366601 0.313443 0.428773
512 0.216282 0.201859 0.231736
1024 0.227069 0.225881 0.228263
2048 0.478814 0.47811 0.47952
4096 0.640725 0.629372 0.652282
EOD
$s3 << EOD
128 0.500483 0.191514 1.30791
256 0.262087 0.222277 0.309026
512 0.146206 0.13385 0.159702
1024 0.195703 0.178713 0.214308
2048 0.269671 0.267099 0.272268
4096 0.345459 0.336943 0.35419
EOD
set title 'Fused over manual attention (median, 95% CI), NVIDIA H200 (0 threads)'
set xlabel 'sequence length'
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
            $s0 using 1:2:3:4 with yerrorlines linestyle 5 title 'fused, fwd time', \
            $s1 using 1:2:3:4 with yerrorlines linestyle 6 title 'fused, fwd+bwd time', \
            $s2 using 1:2:3:4 with yerrorlines linestyle 7 title 'fused, fwd time, causal', \
            $s3 using 1:2:3:4 with yerrorlines linestyle 8 title 'fused, fwd+bwd time, causal', \
            1 with lines dashtype 2 linewidth 1.5 linecolor rgb 'gray30' title 'no change'
        unset output
    }
}
