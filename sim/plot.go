package sim

import (
	"fmt"
	"io"
	"math"
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

// plotColumns is how many strategy panels a row of the figure holds.
const plotColumns = 2

// WritePlot draws per-server load over time, one panel per strategy, all on the
// same scale, to path; the extension picks the format (.svg or .png).
func (r *Report) WritePlot(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("plot %s: want a .svg or .png file", path)
	}
	rows := (len(r.traces) + plotColumns - 1) / plotColumns
	w, h := vg.Length(plotColumns)*12*vg.Centimeter, vg.Length(rows)*7*vg.Centimeter
	var canvas interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if ext == ".svg" {
		canvas = vgsvg.New(w, h)
	} else {
		canvas = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	}
	if err := r.drawPanels(draw.New(canvas), rows); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return f.Close()
}

func (r *Report) drawPanels(dc draw.Canvas, rows int) error {
	plots := make([][]*plot.Plot, rows)
	top := 0.0
	for _, tr := range r.traces {
		for _, w := range tr.windows {
			for _, x := range w.loads {
				if !math.IsNaN(x) {
					top = math.Max(top, x)
				}
			}
		}
	}
	for i, tr := range r.traces {
		p, err := r.panel(i, tr, top)
		if err != nil {
			return err
		}
		if plots[i/plotColumns] == nil {
			plots[i/plotColumns] = make([]*plot.Plot, plotColumns)
		}
		plots[i/plotColumns][i%plotColumns] = p
	}
	tiles := draw.Tiles{Rows: rows, Cols: plotColumns, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for j := range plots {
		for i, p := range plots[j] {
			if p != nil {
				p.Draw(canvases[j][i])
			}
		}
	}
	return nil
}

// panel is one strategy's per-server load over time.
func (r *Report) panel(i int, tr trace, top float64) (*plot.Plot, error) {
	f := r.Strategies[i]
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s  (p50 %.2f, p90 %.2f)", f.Strategy, f.P50, f.P90)
	p.Title.TextStyle.Font.Size = vg.Points(8)
	p.X.Label.Text, p.Y.Label.Text = "minutes", "load (datapoints/s)"
	p.Y.Min, p.Y.Max = 0, top
	servers := 0
	for _, w := range tr.windows {
		servers = max(servers, len(w.loads))
	}
	for s := range servers {
		var xys plotter.XYs
		for _, w := range tr.windows {
			if s < len(w.loads) && !math.IsNaN(w.loads[s]) {
				xys = append(xys, plotter.XY{X: w.end / 60, Y: w.loads[s]})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", f.Strategy, err)
		}
		line.Color = plotutil.Color(s)
		line.Width = vg.Points(0.5)
		p.Add(line)
	}
	return p, nil
}
