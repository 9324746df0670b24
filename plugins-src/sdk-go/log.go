package plugin

// Level is the level the host logs a message at.
type Level int32

const (
	LevelDebug Level = 0
	LevelInfo  Level = 1
	LevelWarn  Level = 2
	LevelError Level = 3
)

// Log sends message (UTF-8) to the host's log at level, through the modelserving.log import
// (at most 64 lines of 1 KiB per call are kept; see abi/README.md section 7). Outside a
// WebAssembly module (tests) messages are kept; TakeLogs returns them.
func Log(level Level, message string) { hostLog(level, message) }

func Debug(message string) { Log(LevelDebug, message) }
func Info(message string)  { Log(LevelInfo, message) }
func Warn(message string)  { Log(LevelWarn, message) }
func Error(message string) { Log(LevelError, message) }

// LogLine is one message logged outside a WebAssembly module.
type LogLine struct {
	Level   Level
	Message string
}
