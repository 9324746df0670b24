module modelserving.dev/examples/team-label-extism

go 1.24

require (
	github.com/extism/go-pdk v1.1.3
	modelserving.dev/plugin v0.0.0
)

replace modelserving.dev/plugin => ../../sdk-go
