module github.com/eventide/eventide/loadtest/peers

go 1.26

replace github.com/eventide/eventide => ../..
