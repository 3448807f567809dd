package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// writePlot draws three stacked charts over time — each server's load, each server's
// weight, and max/mean — with the start of weighting marked, to a .png or .svg file.
// The before/after statistics in summary are drawn as segments over their windows.
func writePlot(path string, s []sample, names []string, switchAt float64, summary [2]phaseStats) error {
	loads := newPlot("load per server (kB/s, 10 s average)", "")
	weights := newPlot("HAProxy weight per server", "")
	imb := newPlot("imbalance: max/mean load (1 = even)", "seconds")
	var ymax float64
	for k, name := range names {
		lp, wp := make(plotter.XYs, len(s)), make(plotter.XYs, len(s))
		for i := range s {
			x := s[i].T.Seconds()
			lp[i] = plotter.XY{X: x, Y: smoothed(s, i)[k] / 1e3}
			wp[i] = plotter.XY{X: x, Y: float64(s[i].Weights[k])}
			ymax = max(ymax, lp[i].Y)
		}
		if err := addLine(loads, name, lp, k); err != nil {
			return err
		}
		if err := addLine(weights, name, wp, k); err != nil {
			return err
		}
	}
	for k, pick := range []func(sample) []float64{loadsOf, controlOf} {
		ip := make(plotter.XYs, 0, len(s))
		for i := range s {
			if v := imbalanceOf(s, i, pick); v == v { // skip NaN
				ip = append(ip, plotter.XY{X: s[i].T.Seconds(), Y: v})
			}
		}
		if err := addLine(imb, []string{"weighted HAProxy", "control (never weighted)"}[k], ip, 2*k); err != nil {
			return err
		}
	}
	for k, st := range summary {
		if st.Seconds == 0 {
			continue
		}
		seg := plotter.XYs{{X: st.From.Seconds(), Y: st.Median}, {X: st.To.Seconds(), Y: st.Median}}
		if err := addLine(imb, fmt.Sprintf("median %s: %.2f", []string{"before", "after"}[k], st.Median), seg, 2*k+1); err != nil {
			return err
		}
	}
	for _, p := range []*plot.Plot{loads, weights, imb} {
		if err := markSwitch(p, switchAt); err != nil {
			return err
		}
	}
	weights.Y.Min, weights.Y.Max = 0, 260
	imb.Y.Min = 1
	return save(path, [][]*plot.Plot{{loads}, {weights}, {imb}})
}

func newPlot(title, xlabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, name string, xys plotter.XYs, k int) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	l.Color = plotutil.Color(k)
	l.Width = vg.Points(1.2)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// markSwitch draws a vertical dashed line where haproxy-weighter started.
func markSwitch(p *plot.Plot, x float64) error {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: p.Y.Min}, {X: x, Y: p.Y.Max}})
	if err != nil {
		return fmt.Errorf("plot marker: %w", err)
	}
	l.Color = color.Gray{Y: 90}
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(l)
	p.Legend.Add("weighter starts", l)
	return nil
}

// save lays the plots out in one column and writes them as PNG or SVG (by extension).
func save(path string, plots [][]*plot.Plot) error {
	w, h := vg.Points(900), vg.Points(300*float64(len(plots)))
	var canvas vg.CanvasSizer
	var write func(*os.File) error
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		sc := vgsvg.New(w, h)
		canvas, write = sc, func(f *os.File) error { _, err := sc.WriteTo(f); return err }
	default:
		ic := vgimg.New(w, h)
		canvas, write = ic, func(f *os.File) error { _, err := vgimg.PngCanvas{Canvas: ic}.WriteTo(f); return err }
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter * 3, PadY: vg.Millimeter * 3,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(plots, tiles, dc)
	for r := range plots {
		plots[r][0].Draw(canvases[r][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
