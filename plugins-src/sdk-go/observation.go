package plugin

// Observations: the measurements an OnPodReady hook may report (abi/README.md section 7.1),
// checked here by the host's rules (section 5.4) and sent in the form the request's abiVersion
// asks for: the response's "observations" (v2) or "observe <name> <seconds>" log lines (v1).

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// Observation is one measurement of an OnPodReady hook: Name matches [a-z][a-z0-9_]{0,62} and
// ends in "_seconds"; Seconds is finite and between 0 and [MaxObservationSeconds]. The host adds
// it to the histogram modelserving_plugin_observation_seconds when the call succeeds.
type Observation struct {
	Name    string
	Seconds float64
}

const (
	// MaxObservations is the most observations one call may report.
	MaxObservations = 64
	// MaxObservationSeconds is the largest observation the host takes: a week.
	MaxObservationSeconds = 7 * 24 * 3600
	// ObservationSuffix ends every observation's name.
	ObservationSuffix = "_seconds"
	// maxQuotedName is how much of a bad name a message quotes (characters), as the host does.
	maxQuotedName = 70
)

// ValidateObservations checks observations by the rules the host applies to a v2 response, in
// its order (abi/README.md section 5.4), and says which entry breaks which rule in the host's
// words, e.g. "observations[0].name: the name 'latency' does not end in _seconds". The host
// would refuse such a response (InvalidResponse), or log such an observe line as an ordinary
// one; [Plugin.Call] answers with this error instead, so a plugin's own tests catch it.
func ValidateObservations(observations []Observation) error {
	// First what is not JSON at all (the host checks that before anything else).
	for i, o := range observations {
		if !utf8.ValidString(o.Name) {
			return observationError(i, ".name is not valid UTF-8")
		}
		if math.IsNaN(o.Seconds) || math.IsInf(o.Seconds, 0) {
			return &observationErr{"the response holds " + pyFloat(o.Seconds) + " at '/observations/" +
				strconv.Itoa(i) + "/seconds', which JSON cannot express"}
		}
	}
	if n := len(observations); n > MaxObservations {
		return &observationErr{"the response has " + strconv.Itoa(n) + " observations; the limit is " +
			strconv.Itoa(MaxObservations)}
	}
	for i, o := range observations {
		if problem := observationNameProblem(o.Name); problem != "" {
			return observationError(i, ".name: "+problem)
		}
		if !(o.Seconds >= 0 && o.Seconds <= MaxObservationSeconds) {
			return observationError(i, ".seconds must be between 0 and "+
				strconv.Itoa(MaxObservationSeconds)+" (7 days), not "+pyFloat(o.Seconds))
		}
	}
	return nil
}

// observationNameProblem is why name cannot name an observation ("" when it can), in the host's
// words: it must match [a-z][a-z0-9_]{0,62}, then end in _seconds.
func observationNameProblem(name string) string {
	shaped := name != "" && len(name) <= 63 && 'a' <= name[0] && name[0] <= 'z'
	for i := 1; shaped && i < len(name); i++ {
		c := name[i]
		shaped = 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_'
	}
	if !shaped {
		return "the name '" + firstRunes(name, maxQuotedName) + "' does not match [a-z][a-z0-9_]{0,62}"
	}
	if len(name) < len(ObservationSuffix) || name[len(name)-len(ObservationSuffix):] != ObservationSuffix {
		return "the name '" + name + "' does not end in " + ObservationSuffix
	}
	return ""
}

// ObservationsResponse is the ABI v2 response of a successful OnPodReady that observed:
// {"observations": [{"name": ..., "seconds": ...}, ...]}, or empty when there are none. It does
// not check them: [ValidateObservations] does.
func ObservationsResponse(observations []Observation) []byte {
	if len(observations) == 0 {
		return nil
	}
	out := make([]byte, 0, 16+48*len(observations))
	out = AppendMapHeader(out, 1)
	out = AppendString(out, "observations")
	out = AppendArrayHeader(out, len(observations))
	for _, o := range observations {
		out = AppendMapHeader(out, 2)
		out = AppendString(out, "name")
		out = AppendString(out, o.Name)
		out = AppendString(out, "seconds")
		out = AppendFloat(out, o.Seconds)
	}
	return out
}

// ObserveLine is the ABI v1 form of o: the info line "observe <name> <seconds>", the seconds
// with three decimals (as the Rust SDK writes them; -0 as 0, since the host reads only digits).
func ObserveLine(o Observation) string {
	seconds := o.Seconds
	if seconds == 0 {
		seconds = 0 // -0 would print as "-0.000"
	}
	return "observe " + o.Name + " " + strconv.FormatFloat(seconds, 'f', 3, 64)
}

type observationErr struct{ message string }

func (e *observationErr) Error() string { return e.message }

func observationError(i int, rest string) error {
	return &observationErr{"observations[" + strconv.Itoa(i) + "]" + rest}
}

// firstRunes is s cut after n characters (code points, as Python counts them).
func firstRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// pyFloat formats x as Python's repr does (how the host's messages show a number): "1.0",
// "-0.5", "1e+16", "1.5e-05", "nan", "inf".
func pyFloat(x float64) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	if a := math.Abs(x); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.FormatFloat(x, 'e', -1, 64)
	}
	s := strconv.FormatFloat(x, 'f', -1, 64)
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s
		}
	}
	return s + ".0"
}
