module bloomguard

go 1.19
