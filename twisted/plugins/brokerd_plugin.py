from brokerd.start_gc import StartingServiceMaker

brokerd = StartingServiceMaker("brokerd", "brokerd.tap", "Kafka-like message broker", "broker")
