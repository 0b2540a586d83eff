package replay

import (
	"io"
	"math"
	"strings"
	"testing"
)

const sgHeader = "model,client_id,window_start_s,window_len_s,rate_rps,iat_cv,arrival_dist,dist_p1,dist_p2,mean_input_tokens,mean_output_tokens\n"

// TestHostileTraceValues: each input, read as a reviewer did, panicked, came out as NaN, a
// wrapped time or a number nobody wrote; each is now refused with exactly this error.
func TestHostileTraceValues(t *testing.T) {
	tests := []struct {
		name    string
		open    func(io.Reader) (Source, error)
		give    string
		wantErr string
	}{
		// Binned: mean² underflowed to 0, and distuv.Gamma.Rand panicked "gamma: alpha <= 0".
		{"servegen rate 1e-300", readServeGen, sgHeader + "m,1,0,600,1e-300,1,Gamma,1,1,100,100\nm,1,600,600,1,1,Gamma,1,1,100,100\n",
			`line 2, column rate_rps, value "1e-300": bad value: want 0 or a rate in [1e-09, 1e+07] req/s (ServeGenMinRateRPS: below it a window expects under 0.01 request in all of MaxTraceSpan; write 0 for an idle window)`},
		// Binned: cv² was denormal, the Gamma's alpha and beta +Inf and every count NaN.
		{"servegen iat_cv 1e-160", readServeGen, sgHeader + "m,1,0,600,1,1e-160,Gamma,1,1,100,100\n",
			`line 2, column iat_cv, value "1e-160": bad value: want 0 or a CV in [0.001, 10000] (ServeGenMinIATCV: the CV of a Gamma of shape 1e6, the largest dist_p1; write 0 for evenly spaced arrivals)`},
		// Γ(1+1/0.001) overflowed, the scale became 0: 9 requests, all at t=0.
		{"servegen weibull shape 0.001", readServeGen, sgHeader + "m,1,0,60,0.01,1,Weibull,0.001,1,100,100\n",
			`line 2, column dist_p1, value "0.001": bad value: want a Weibull shape in [0.1, 1e+06] (ServeGenMinWeibullShape: inter-arrival CV 430 at 0.1, within a Gamma's 1e3 at dist_p1 1e-6; Γ(1+1/shape) overflows float64 near 0.006)`},
		// Γ(1+1/0.01) is finite, but the window was one burst: every seed ran to MaxRequests.
		{"servegen weibull shape 0.01", readServeGen, sgHeader + "m,1,0,60,10,1,Weibull,0.01,1,100,100\n",
			`line 2, column dist_p1, value "0.01": bad value: want a Weibull shape in [0.1, 1e+06]`},
		// Γ(1+1/0.0059) = 5.3e305 is finite, but 1/(1e7·Γ) is 0: every request at t=0.
		{"servegen weibull scale underflowing", readServeGen, sgHeader + "m,1,0,1,1e7,1,Weibull,0.0059,1,100,100\n",
			`line 2, column dist_p1, value "0.0059": bad value: want a Weibull shape in [0.1, 1e+06]`},
		{"servegen hex rate", readServeGen, sgHeader + "m,1,0,60,0x1p4,1,Gamma,1,1,100,100\n",
			`line 2, column rate_rps, value "0x1p4": bad value: want a number in [0, 1e+07] written in plain decimal or exponent notation (e.g. 2.5 or 1e3)`},
		{"servegen underscore client", readServeGen, sgHeader + "m,1_0,0,60,1,1,Gamma,1,1,100,100\n",
			`line 2, column client_id, value "1_0": bad value: want an integer in [0, 2147483647] written in plain decimal (e.g. 40 or 4e3)`},
		// f*1e9 rounded to 2^63 and time.Duration wrapped to MinInt64: accepted as two
		// requests 1 µs apart.
		{"generic timestamp rounding to 2^63", NewGeneric, "timestamp,model\n9223372036.854776,a\n-9223372036.854775,a\n",
			`line 2, column timestamp, value "9223372036.854776": bad value: want seconds in [-9.2e+09, 9.2e+09] (int64 nanoseconds hold ±9.22e9 s, the years 1677 to 2262)`},
		// ... and refused with a false "timestamp before the previous row's".
		{"generic timestamp rounding to 2^63 second row", NewGeneric, "timestamp,model\n0,a\n9223372036.854776,a\n",
			`line 3, column timestamp, value "9223372036.854776": bad value: want seconds in [-9.2e+09, 9.2e+09] (int64 nanoseconds hold ±9.22e9 s, the years 1677 to 2262)`},
		{"generic timestamp past float64", NewGeneric, "timestamp\n1e400\n",
			`line 2, column timestamp, value "1e400": bad value: want seconds in [-9.2e+09, 9.2e+09] (int64 nanoseconds hold ±9.22e9 s, the years 1677 to 2262)`},
		{"generic date past 2262", NewGeneric, "timestamp\n2300-01-01T00:00:00Z\n",
			`line 2, column timestamp, value "2300-01-01T00:00:00Z": bad value: want a time from 1677-09-21 to 2262-04-11 (what int64 nanoseconds hold)`},
		// ParseFloat read 0x1p4 as 16 s and 1_0 as 10.
		{"generic hex timestamp", NewGeneric, "timestamp\n0x1p4\n",
			`line 2, column timestamp, value "0x1p4": bad value: want RFC 3339, YYYY-MM-DD HH:MM:SS[.frac] or seconds in plain decimal (e.g. 1704067200.5)`},
		{"generic underscore timestamp", NewGeneric, "timestamp\n1_0\n",
			`line 2, column timestamp, value "1_0": bad value: want RFC 3339, YYYY-MM-DD HH:MM:SS[.frac] or seconds in plain decimal (e.g. 1704067200.5)`},
		{"generic infinite timestamp", NewGeneric, "timestamp\ninfinity\n",
			`line 2, column timestamp, value "infinity": bad value: want RFC 3339, YYYY-MM-DD HH:MM:SS[.frac] or seconds in plain decimal (e.g. 1704067200.5)`},
		{"generic hex tokens", NewGeneric, "timestamp,input_tokens\n1,0x1p4\n",
			`line 2, column input_tokens, value "0x1p4": bad value: want an integer in [0, 2147483647] written in plain decimal (e.g. 40 or 4e3)`},
		{"generic underscore tokens", NewGeneric, "timestamp,output_tokens\n1,1_0\n",
			`line 2, column output_tokens, value "1_0": bad value: want an integer in [0, 2147483647] written in plain decimal (e.g. 40 or 4e3)`},
		{"gentd26 underscore exec", NewGenTD26, "gmt_create,exec_time_seconds,checkpoint_model_version_id\n2024-11-15 16:57:50,1_0,M0\n",
			`line 2, column exec_time_seconds, value "1_0": bad value: want a number in [0, 604800] written in plain decimal or exponent notation (e.g. 2.5 or 1e3)`},
		{"gentd26 hex exec", NewGenTD26, "gmt_create,exec_time_seconds,checkpoint_model_version_id\n2024-11-15 16:57:50,0x1p4,M0\n",
			`line 2, column exec_time_seconds, value "0x1p4": bad value: want a number in [0, 604800] written in plain decimal or exponent notation (e.g. 2.5 or 1e3)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := tt.open(strings.NewReader(tt.give))
			got, err := readAll(t, src, err)
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("error = %.300v (%d requests, the first %v)\nwant %s", err, len(got), got[:min(len(got), 3)], tt.wantErr)
			}
		})
	}
}

// TestPlainDecimalsStillRead: the notations a trace writes still parse as before.
func TestPlainDecimalsStillRead(t *testing.T) {
	src, err := NewGeneric(strings.NewReader("timestamp,input_tokens,output_tokens\n-1.5,1e3,+7\n.5,40.,0\n1e1,0.0,1E2\n"))
	got, err := readAll(t, src, err)
	if err != nil {
		t.Fatal(err)
	}
	want := [][3]int64{{0, 1000, 7}, {2e9, 40, 0}, {11.5e9, 0, 100}}
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d", len(got), len(want))
	}
	for i, r := range got {
		if g := [3]int64{int64(r.At), int64(r.InputTokens), int64(r.OutputTokens)}; g != want[i] {
			t.Errorf("request %d = %v, want %v", i, g, want[i])
		}
	}
	for _, s := range []string{"0", "-0", "+1", "1.", ".5", "1e5", "1E-5", "2.5e+3", "007"} {
		if !plainDecimal(s) {
			t.Errorf("plainDecimal(%q) = false", s)
		}
	}
	for _, s := range []string{"", ".", "+", "e5", "1e", "1e+", "0x10", "0x1p4", "1_0", "Inf", "-inf", "NaN", "infinity", "1.2.3", "1e5.0", " 1", "1 ", "--1", "1,0"} {
		if plainDecimal(s) {
			t.Errorf("plainDecimal(%q) = true", s)
		}
	}
}

// TestBinnedDegenerateGamma: windows whose count Gamma has no finite, positive parameters
// (built directly, or reached with a tiny rateScale the reader cannot see) get the
// deterministic mean count instead of a panic or NaN counts.
func TestBinnedDegenerateGamma(t *testing.T) {
	win := func(start, rate, cv float64) Window {
		return Window{StartS: start, LenS: 600, RateRPS: rate, IATCV: cv, P1: 1, P2: 1, InputTokens: 100, OutputTokens: 100}
	}
	tests := []struct {
		name      string
		windows   []Window
		rateScale float64
		wantFirst float64 // every count of the first window
	}{
		// alpha = mean²/var = 0: distuv.Gamma.Rand panicked "gamma: alpha <= 0".
		{"rate 1e-300", []Window{win(0, 1e-300, 1), win(600, 1, 1)}, 1, 1e-300},
		// cv² denormal: alpha, beta = +Inf, every count NaN.
		{"iat_cv 1e-160", []Window{win(0, 1, 1e-160), win(600, 1, 1)}, 1, 1},
		// Rates the reader accepts, scaled by a --rate-scale inside (0, 1e6].
		{"rate scale 1e-300", []Window{win(0, 1, 1), win(600, 1, 1)}, 1e-300, 1e-300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sg := &ServeGen{Models: []string{"m"}, Windows: tt.windows, LenS: 600}
			b := sg.Binned(DefaultServiceModel(), 1, tt.rateScale)
			if len(b.Arrivals) != 1200 {
				t.Fatalf("%d bins, want 1200", len(b.Arrivals))
			}
			for s, c := range b.Arrivals {
				if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 || math.IsNaN(b.WorkS[s]) || math.IsInf(b.WorkS[s], 0) {
					t.Fatalf("second %d: count %g, work %g; want finite and ≥ 0", s, c, b.WorkS[s])
				}
				if s < 600 && c != tt.wantFirst {
					t.Fatalf("second %d: count %g, want the mean %g", s, c, tt.wantFirst)
				}
			}
		})
	}
}

// TestServeGenRangeEdges: the extremes the reader accepts give finite, positive
// distribution parameters, so binned counts and Weibull gaps are real numbers.
func TestServeGenRangeEdges(t *testing.T) {
	in := sgHeader +
		"m,1,0,600,1e-9,0.001,Gamma,1e6,1,100,100\n" +
		"m,2,0,600,1e-9,1e4,Weibull,0.1,1,100,100\n" +
		"m,1,600,600,1e7,0.001,Weibull,0.1,1,100,100\n" +
		"m,2,1200,600,1e7,1e4,Gamma,1e-6,1,100,100\n" +
		"m,3,1800,600,0,0,Weibull,0.1,1,100,100\n"
	sg, err := ReadServeGen(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	for _, scale := range []float64{1, 1e6} {
		b := sg.Binned(DefaultServiceModel(), 1, scale)
		for s, c := range b.Arrivals {
			if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
				t.Fatalf("rate scale %g, second %d: count %g; want finite and ≥ 0", scale, s, c)
			}
		}
	}
	for _, rate := range []float64{ServeGenMinRateRPS, 1e7} {
		for _, k := range []float64{ServeGenMinWeibullShape, 1e6} {
			if l := weibullScale(k, rate); !(l >= 0x1p-1022 && l <= math.MaxFloat64) {
				t.Errorf("weibullScale(%g, %g) = %g, want a finite, normal, positive scale", k, rate, l)
			}
		}
	}
	// A Weibull window at the smallest shape synthesizes requests at real times.
	sg, err = ReadServeGen(strings.NewReader(sgHeader + "m,1,0,60,10,1,Weibull,0.1,1,100,100\n"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadAll("sg", FormatServeGen, sg.Requests(1))
	if err != nil {
		t.Fatal(err)
	}
	// 600 expected; a CV of 430 makes it bursty, not one burst to MaxRequests.
	if len(tr.Requests) == 0 {
		t.Fatal("no requests; want about 600")
	}
	if n := len(tr.Requests); n > 60_000 || tr.Requests[0].At == tr.Requests[n-1].At {
		t.Fatalf("%d requests from %v to %v; want about 600 spread over the window", n, tr.Requests[0].At, tr.Requests[n-1].At)
	}
	for _, r := range tr.Requests {
		if r.At < 0 || r.At.Seconds() >= 60 {
			t.Fatalf("request at %v, want within [0, 60 s)", r.At)
		}
	}
}
