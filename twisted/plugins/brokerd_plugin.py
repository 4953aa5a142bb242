from twisted.application.service import ServiceMaker

brokerd = ServiceMaker("brokerd", "brokerd.tap", "Kafka-like message broker", "broker")
