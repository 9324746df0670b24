module modelserving.dev/examples/entry-address

go 1.24

require modelserving.dev/plugin v0.0.0

replace modelserving.dev/plugin => ../../sdk-go
