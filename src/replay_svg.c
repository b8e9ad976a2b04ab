/*
 * replay_svg.c - the chart of `oeapatch replay --svg FILE`: T after / T
 * before against the regrouped batch size (a log2 axis, as batch sizes are
 * chosen), one line per k0, so that where OEA starts to pay and how much
 * each k0 buys is seen at a glance. A plain SVG 1.1 document: any browser
 * shows it, nothing is needed to draw it.
 */
#include <math.h>
#include <stdio.h>

#include "replay_report.h"

#define W 720
#define H 440
#define LEFT 70
#define RIGHT 150
#define TOP 40
#define BOTTOM 60

static const char *const colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

int oeap_replay_write_svg(FILE *f, const oeap_replay *r)
{
	const double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
	double lo = 0, hi = 1;
	if (r->nmodes > 1) {
		lo = log2((double)r->mode[1]);
		hi = log2((double)r->mode[r->nmodes - 1]);
	}
	if (hi <= lo)
		hi = lo + 1;
#define X(b) (LEFT + pw * (log2((double)(b)) - lo) / (hi - lo))
#define Y(v) (TOP + ph * (1.0 - (v)))
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	           "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
	           "font-family=\"sans-serif\" font-size=\"12\">\n"
	           "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
	           "<text x=\"%d\" y=\"22\" font-size=\"15\">T after / T before by batch size (oeapatch replay)</text>\n",
	        W, H, LEFT);
	/* the axes, with a grid line per tenth and per replayed batch size */
	for (int i = 0; i <= 10; i++) {
		double v = i / 10.0;
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT, Y(v), LEFT + pw, Y(v));
		fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n", LEFT - 6, Y(v) + 4, v);
	}
	for (size_t m = 1; m < r->nmodes; m++) {
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", X(r->mode[m]), TOP,
		        X(r->mode[m]), TOP + ph);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n", X(r->mode[m]), TOP + ph + 16,
		        r->mode[m]);
	}
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n", LEFT, TOP,
	        pw, ph);
	fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">batch size (rows of one layer, regrouped)</text>\n",
	        LEFT + pw / 2, H - 18);
	fprintf(f, "<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\">T after / T before</text>\n",
	        TOP + ph / 2);
	for (size_t k = 0; k < r->nk0; k++) {
		const char *c = colours[k % (sizeof(colours) / sizeof(colours[0]))];
		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c);
		for (size_t m = 1; m < r->nmodes; m++) {
			oeap_replay_figures g;
			oeap_replay_figures_of(r, NULL, m, k, &g);
			fprintf(f, "%s%.1f,%.1f", m > 1 ? " " : "", X(r->mode[m]), Y(g.ratio));
		}
		fprintf(f, "\"/>\n");
		for (size_t m = 1; m < r->nmodes; m++) {
			oeap_replay_figures g;
			oeap_replay_figures_of(r, NULL, m, k, &g);
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>k0=%d batch %d: T %.2f -> %.2f, p5 kept %.3f</title></circle>\n",
			        X(r->mode[m]), Y(g.ratio), c, r->k0[k], r->mode[m], g.t_before, g.t_after, g.kept_p5);
		}
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>"
		           "<text x=\"%.1f\" y=\"%.1f\">k0 = %d</text>\n",
		        LEFT + pw + 14, TOP + 10 + 18.0 * (double)k, LEFT + pw + 40, TOP + 10 + 18.0 * (double)k, c,
		        LEFT + pw + 46, TOP + 14 + 18.0 * (double)k, r->k0[k]);
	}
	fprintf(f, "</svg>\n");
	return ferror(f) ? -1 : 0;
#undef X
#undef Y
}
