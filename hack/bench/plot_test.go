package main

import (
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// writePlots draws every figure of a full run (the results on docs/benchmarks) as a PNG of one
// panel per concurrency or Database count.
func TestWritePlotsDrawsEveryFigureOfAFullRun(t *testing.T) {
	data, err := os.ReadFile("../../docs/benchmarks/results.json")
	require.NoError(t, err)
	var res results
	require.NoError(t, json.Unmarshal(data, &res))
	dir := t.TempDir()
	require.NoError(t, writePlots(dir, &res))

	concs := len(res.Meta.Scale.Concurrency)
	for name, size := range map[string][2]int{
		"throughput-ratio.png": {1400, 420 * concs},
		"throughput.png":       {1400, 420 * concs},
		"latency-p50.png":      {1400, 420 * concs},
		"latency-p99.png":      {1400, 420 * concs},
		"cpu.png":              {1400, 420 * concs},
		"watch.png":            {900, 440},
		"memory.png":           {900, 460},
		"controller.png":       {1100, 440 * 2},
	} {
		f, err := os.Open(filepath.Join(dir, name))
		require.NoError(t, err, name)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err, name)
		require.Equal(t, size, [2]int{img.Bounds().Dx(), img.Bounds().Dy()}, name)
	}
}

func TestYAxisRange(t *testing.T) {
	lo, hi := yAxisRange([]float64{0.54, math.NaN(), 6.5, 0}, true)
	require.Equal(t, 0.1, lo, "the decade below the smallest positive value")
	require.Equal(t, 26.0, hi, "room above the largest for the legend")
	lo, hi = yAxisRange([]float64{79, 263, math.NaN()}, false)
	require.Equal(t, 0.0, lo)
	require.InDelta(t, 355.05, hi, 1e-9)
	lo, hi = yAxisRange([]float64{math.NaN()}, true)
	require.Equal(t, [2]float64{1, 10}, [2]float64{lo, hi})
}

func TestBarChartRefusesSeriesOfTheWrongLength(t *testing.T) {
	_, err := barChart{title: "t", categories: []string{"a", "b"}, series: []series{{name: "s", values: []float64{1}}}}.plot()
	require.ErrorContains(t, err, "series s has 1 values for 2 categories")
}
