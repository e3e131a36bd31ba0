package kafkawire

// AppendProduce is appendProduce, for the encoding's test.
var AppendProduce = appendProduce
