# forest.gp - written by tunebench (lib/report/plot.c). Re-render by hand with:
#     cd <this directory> && gnuplot forest.gp
# Set tb_png, tb_svg or tb_pdf (gnuplot -e "tb_pdf=''" ...) to change an
# output name; an empty name skips that format.
if (!exists("tb_png")) tb_png = 'forest.png'
if (!exists("tb_svg")) tb_svg = 'forest.svg'
if (!exists("tb_pdf")) tb_pdf = 'forest.pdf'
set encoding utf8
set style line 1 linecolor rgb '#0072b2' linewidth 2 pointtype 5 pointsize 1
set style line 2 linecolor rgb '#d55e00' linewidth 2 pointtype 7 pointsize 1
set style line 3 linecolor rgb '#009e73' linewidth 2 pointtype 9 pointsize 1
set style line 4 linecolor rgb '#cc79a7' linewidth 2 pointtype 11 pointsize 1
set style line 5 linecolor rgb '#e69f00' linewidth 2 pointtype 5 pointsize 1
set style line 6 linecolor rgb '#56b4e9' linewidth 2 pointtype 7 pointsize 1
set style line 7 linecolor rgb '#f0e442' linewidth 2 pointtype 9 pointsize 1
set style line 8 linecolor rgb '#000000' linewidth 2 pointtype 11 pointsize 1
$f1_0 << EOD
8 1.48365 1.37929 1.59592 0.928912 1.07109 29362
7 1.45022 1.38305 1.52065 0.492589 1.50741 29362
6 1.08166 1.08077 1.08254 0.997745 1.00225 29362
5 1.07061 1.06912 1.07209 0.996441 1.00356 29362
4 1.05708 0.7753 1.44128 0.944027 1.05597 7829367
3 1.00191 0.999939 1.00388 0.997907 1.00209 7829367
2 0.414577 0.339816 0.505787 0.767342 1.23266 13983232
1 0.975741 0.973678 0.977807 0.997385 1.00262 13983232
EOD
$f0_0 << EOD
4 16.2555 15.4383 17.116 0.95593 1.04407 29362
3 6.31568 6.19859 6.43499 0.999109 1.00089 29362
2 5.40221 5.34553 5.4595 0.997255 1.00275 29362
1 0.453773 0.452427 0.455123 0.998946 1.00105 13983232
EOD
tb_xlo = 0.2614
tb_xhi = 22.25
do for [tb_i = 1:3] {
    tb_out = (tb_i == 1 ? tb_png : tb_i == 2 ? tb_svg : tb_pdf)
    if (tb_out ne '') {
        if (tb_i == 1) { set terminal pngcairo size 1069,524 noenhanced font 'Sans,12' }
        if (tb_i == 2) { set terminal svg size 1069,524 noenhanced font 'Sans,12' }
        if (tb_i == 3) { set terminal pdfcairo size 8in,3.92in noenhanced font 'Sans,10' }
        set output tb_out
        set multiplot
        set logscale x 2
        set xrange [tb_xlo:tb_xhi]
        set format x '%g×'
        set grid xtics
        set mxtics 1
        set xlabel 'speedup over the baseline (×, log scale; right of 1× is faster)'
        unset key
        set label 1 '▬ noise band (A/A)' at screen 0.0094, screen 0.985 textcolor rgb '#999999'
        set label 2 '● faster' at screen 0.2432, screen 0.985 textcolor rgb '#0072b2'
        set label 3 '● no detectable effect' at screen 0.3555, screen 0.985 textcolor rgb '#777777'
        set label 4 '● slower' at screen 0.5613, screen 0.985 textcolor rgb '#d55e00'
        set lmargin at screen 0.4624
        set rmargin at screen 0.9800
        set tmargin at screen 0.8282
        set bmargin at screen 0.5076
        set yrange [0.4:8.6]
        set title "training step or epoch: technique: setting (workload)"
        set ytics ("host_syncs: read every 10 (resnet50-full-synthetic)" 8, "mixed_precision: bf16 (resnet50-full-synthetic)" 7, "mixed_precision: bf16 (gpt2-full-synthetic)" 6, "fused_gelu_step: fused (gpt2-full-synthetic)" 5, "conv_bias: no bias (resnet50-full-synthetic)" 4, "host_syncs: read every 10 (gpt2-full-synthetic)" 3, "channels_last: channels last (resnet50-full-synthetic)" 2, "checkpointing: checkpointing (gpt2-full-synthetic)" 1) nomirror scale 0
        set arrow 1 from 1, graph 0 to 1, graph 1 nohead dashtype 2 linewidth 1.5 linecolor rgb 'black' front
        plot $f1_0 using 2:1:5:6:($1-0.32):($1+0.32) with boxxyerror fillstyle solid 0.35 noborder linecolor rgb '#bbbbbb', \
            $f1_0 using 2:1:3:4:7 with xerrorbars pointtype 7 pointsize 1.3 linewidth 2 linecolor rgb variable
        unset label
        set lmargin at screen 0.4624
        set rmargin at screen 0.9800
        set tmargin at screen 0.3015
        set bmargin at screen 0.1412
        set yrange [0.4:4.6]
        set title "single kernels and operations: technique: setting (metric)"
        set ytics ("mixed_precision_ops: bf16 (gemm time)" 4, "fused_layernorm: fused (fwd time)" 3, "gelu: fused (fwd time)" 2, "fused_attention: fused (fwd time)" 1) nomirror scale 0
        set arrow 1 from 1, graph 0 to 1, graph 1 nohead dashtype 2 linewidth 1.5 linecolor rgb 'black' front
        plot $f0_0 using 2:1:5:6:($1-0.32):($1+0.32) with boxxyerror fillstyle solid 0.35 noborder linecolor rgb '#bbbbbb', \
            $f0_0 using 2:1:3:4:7 with xerrorbars pointtype 7 pointsize 1.3 linewidth 2 linecolor rgb variable
        unset label
        unset multiplot
        unset output
    }
}
